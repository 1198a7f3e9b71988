"""``kernelfoundry.eval_pipeline.utils.benchdnn_helper`` — the reference's path for the benchdnn helpers
(``check_correctness_benchdnn``, ``measure_runtime_benchdnn``, ``parse_benchdnn_correctness_check``,
``parse_benchdnn_perf_stats``). It is the very module ``kernelfoundry.benchdnn`` (one implementation)."""

import sys

from ... import benchdnn as _benchdnn

sys.modules[__name__] = _benchdnn
