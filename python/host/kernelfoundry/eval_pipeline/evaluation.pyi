"""Type stubs of kernelfoundry.eval_pipeline.evaluation (kf::Evaluate, include/kernelfoundry/evaluate.hpp)."""

from os import PathLike
from typing import Any, Callable, Optional, Union

from .task import ProcessResult, Task

class Evaluation:
    """The outcome of evaluate()."""

    @property
    def task(self) -> Task:
        """The candidate task with build_result(_reference) and test_result(_reference) set."""
    @property
    def status(self) -> str:
        """Typed status: 'correct', 'no_reference', 'no_measurement', 'reference_only', 'value_mismatch',
        'shape_mismatch', 'tests_failed', 'crash', 'test_timeout', 'resource_limit', 'test_error',
        'build_error', 'build_timeout', 'extraction_failed', 'skipped', 'reference_failed', ..."""
    @property
    def reference_status(self) -> str:
        """The reference's status string: 'correct', 'compiled' or 'error'."""
    @property
    def status_detail(self) -> str: ...
    @property
    def perf_score(self) -> int:
        """Reference scale: 5 correct, 4 value mismatch, 3 tests failed, 2 crash/timeout, 1 not compiled, 0
        extraction failed or error."""
    @property
    def correct(self) -> bool:
        """perf_score 5 and correctness (what makes `kf run` exit 0)."""
    @property
    def speedup(self) -> float:
        """Reference ms / candidate ms (geometric mean over benchmarks and archs); -1 or 9.999e-10 when none."""
    @property
    def runtime_ms(self) -> float:
        """Candidate runtime in milliseconds (mean of the benchmark means); -1 when not measured."""
    @property
    def combined_score(self) -> float:
        """compute_performance_score: perf_score + speedup (or + 1/runtime); -1 when not evaluated."""
    @property
    def eval_result(self) -> dict:
        """The reference's EvalResult dict (compiled, correctness, metadata, runtime, runtime_stats,
        runtime_improvement, improve_over_compile, perf_score, profiler_data, template_results)."""
    @property
    def result(self) -> dict:
        """eval_result + eval_log, status, status_detail, reference_status, benchmarks [{arch, name,
        reference_mean_ms, candidate_mean_ms, speedup, num_trials}]."""
    @property
    def eval_log(self) -> str: ...
    @property
    def archs(self) -> list[str]: ...
    @property
    def input_code(self) -> str:
        """The EVOLVE code before the candidate was put in."""
    @property
    def output_code(self) -> str:
        """The EVOLVE code evaluated."""
    @property
    def logs(self) -> list[dict]:
        """[{'name': 'build custom', 'result': ProcessResult, 'worker_info': dict}, ...] in run order."""
    @property
    def timings(self) -> dict:
        """Seconds: {'build_s', 'test_s', 'wall_s', 'phases': [(name, seconds), ...]}."""
    @property
    def work_dirs(self) -> list[str]:
        """Directories kept on disk (keep_workdir=True)."""
    @property
    def job_id(self) -> Optional[int]:
        """jobs.id of the recorded run (evaluate(db=...)), else None."""
    @property
    def kernel_id(self) -> Optional[int]:
        """kernels.id of the stored row, else None (not recorded, or canceled)."""
    @property
    def kernel_uuid(self) -> Optional[str]:
        """kernels.uuid of the stored row (the parent_uuid of candidates derived from this one), else None."""
    @property
    def cached(self) -> Optional[dict]:
        """The verdict cache entry the verdict was reused from ({'key', 'job_id', 'created_at'}), else None."""
    @property
    def canceled(self) -> bool:
        """The recorded job was CANCELED from outside before or while it ran (no kernels row then)."""

def evaluate(task: Union[Task, str, PathLike, bytes], candidate: Union[None, str, dict] = None,
             gpu_arch: Optional[str] = None, *, test_reference: bool = True, overrides: Optional[dict] = None,
             progress: Optional[Callable[[dict], Any]] = None,
             on_output_line: Optional[Callable[[bool, str], Any]] = None, keep_workdir: bool = False,
             work_root: Optional[Union[str, PathLike]] = None, db: Optional[Union[str, PathLike]] = None,
             verdict_cache: bool = False, parent_uuid: Optional[str] = None, trial: Optional[int] = None, version: Optional[int] = None,
             prompt: Optional[str] = None, answer: Optional[str] = None, language_model: Optional[str] = None,
             agent_session_id: Optional[str] = None, db_user: Optional[str] = None) -> Evaluation:
    """Evaluates a candidate end to end, like `kf run TASK --no-store` (db=None) or `kf run TASK --db URL`.

    task: a Task, or a package path / archive bytes (loaded with Task.create; its overrides.yml applies).
    The task is validated first (Task.validate). candidate: None (the task's own EVOLVE code), a str (the new
    content of the task's single EVOLVE block) or a with_blocks dict ({KEY: str|None} or
    {KEY: {path: [str|None]}}); a None inside gives the 'extraction_failed' verdict (perf_score 0).
    gpu_arch: overrides config gpu_arch ('a,b' tests on several). test_reference=False skips the reference
    (no speedup). overrides: merged into the config (OmegaConf-style deep merge) before evaluating.
    progress(event): called at the start and end of every phase with {'phase': 'build candidate' |
    'build reference' | 'correctness' | 'performance', 'variant', 'gpu_arch', 'finished', 'ok',
    'elapsed_s' (seconds), 'note'}; on_output_line(is_stderr, line): every output line of every child.
    Callbacks run on pipeline threads with the GIL held; an exception in one stops the evaluation and is
    re-raised. The GIL is released while children run. Ctrl-C stops the evaluation (the running child tree
    is killed) and raises KeyboardInterrupt once it has wound down.

    db: a store URL (as open_store): the run is recorded there as `kf run --db` records it — a job (INIT ->
    RUN -> COMPLETE, FAIL on an exception), the tasks row, one kernels row (with kf_status and the lineage
    columns given: parent_uuid, trial, version, prompt, answer, language_model, agent_session_id, db_user —
    default the OS user) and the job_logs rows in the reference's format; Evaluation.job_id / kernel_uuid say
    where. A job CANCELED meanwhile stops the run. Lineage arguments without db raise InvalidArgumentError.

    verdict_cache=True: an evaluation identical to an earlier one on this machine (task, candidate, config,
    archs, worker fingerprint) returns the stored verdict without building or testing, as `kf run` does by
    default (Evaluation.cached says so); only verdicts that are properties of the candidate are stored, never
    timeouts, resource limits, crashes, noisy or suspicious timing.

    Candidate failures (extraction, build, crash, timeout, wrong values) are verdicts, not exceptions.
    Raises InvalidArgumentError (invalid task, block update that does not fit the task, no gpu_arch),
    NotFoundError (missing package), IoError (work dirs cannot be created).
    """
