"""Test task py_sum_squares: the candidate's sum of squares against Python's built-in sum."""

import pytest

from kernelfoundry import TestBase

import kernel


# [REFERENCE_START]
def reference_sum_squares(xs):
    return sum(x * x for x in xs)
# [REFERENCE_END]


@pytest.fixture(scope="session")
def impl(use_reference):
    return reference_sum_squares if use_reference else kernel.sum_squares


def _inputs(n):
    return [float(i % 13) - 6.0 for i in range(n)]


class TestSumSquares(TestBase):
    def test_values_match(self, impl):
        xs = _inputs(1000)
        assert abs(impl(xs) - reference_sum_squares(xs)) <= 1e-9 * max(1.0, reference_sum_squares(xs))

    def test_empty(self, impl):
        assert impl([]) == 0.0

    @pytest.mark.performance
    def test_benchmark(self, impl, measure_runtime):
        xs = _inputs(20000)
        measure_runtime(impl, lambda: None, args=(xs,), auto_replicate_inputs_size=0)
