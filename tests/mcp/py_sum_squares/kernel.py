"""The candidate of the py_sum_squares test task."""
import time

# [EVOLVE_START]
DELAY_S = 0.0


def sum_squares(xs):
    time.sleep(DELAY_S)
    total = 0.0
    for x in xs:
        total += x * x
    return total
# [EVOLVE_END]
