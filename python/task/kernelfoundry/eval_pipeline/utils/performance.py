"""``kernelfoundry.eval_pipeline.utils.performance`` — the path the reference documents for the task-side
measurement helpers (measure_runtime, measure_runtime_torch, profiler_session, detect_profiler). It is the very
module ``kernelfoundry.utils.performance`` (one implementation; patching a name through either path patches
both); it needs no compiled core, so a task's test process imports it cheaply."""

import sys

from ...utils import performance as _performance

sys.modules[__name__] = _performance
