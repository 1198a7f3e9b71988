"""kernelfoundry.eval_pipeline.evaluation — evaluate a candidate end to end from Python.

``evaluate(task, candidate)`` does what ``kf run TASK --candidate FILE --no-store`` does (with ``db=URL`` what
``kf run --db URL`` does: the run is recorded, lineage columns such as ``parent_uuid`` included): the task is
validated, its overrides applied, the candidate put into the EVOLVE block(s), the candidate and the reference
built and tested (correctness, then performance) in contained child processes, and the result scored
(include/kernelfoundry/evaluate.hpp, reference spec §4.1-§4.9). The GIL is released while children run;
callbacks are called with the GIL from the pipeline's threads. Ctrl-C (KeyboardInterrupt) stops the evaluation
(``EvaluateOptions::stop``: the running child tree is killed) and is re-raised when it has wound down.
"""

from __future__ import annotations

from ._core import Evaluation, evaluate

__all__ = ["evaluate", "Evaluation"]
