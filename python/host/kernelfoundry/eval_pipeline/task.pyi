"""Type stubs of kernelfoundry.eval_pipeline.task (implemented by the C++ core in _core).

Source of the semantics: reference spec §1.2 and §3 (shared/spec/reference-spec.md), the seed API document,
include/kernelfoundry/task.hpp and results.hpp. Errors: the classes of kernelfoundry.eval_pipeline.errors,
each also the builtin the reference raises (named in each docstring).
"""

import kernelfoundry.eval_pipeline.database.tables
from os import PathLike
from subprocess import CompletedProcess
from typing import Any, Callable, Optional, Union

from .utils.memory_file_map import MemoryFileMap

class ProcessResult:
    """The output of one child process (build, test, profiler pass) with a pipeline message and parsed
    output data (spec §3.1). Text fields are UTF-8 str without terminal escapes."""

    returncode: int
    """Exit status; negative = killed by that signal number."""
    stdout: str
    stderr: str
    message: Optional[str]
    """Pipeline note, e.g. 'Process timed out after 120 seconds'."""
    output_data: Optional[dict]
    """Parsed outputs, e.g. {'runtimes': {node_id: [ms, ...]}} (a copy: assign to change it)."""

    def __init__(self, returncode: int, stdout: Union[str, bytes], stderr: Union[str, bytes],
                 message: Optional[str] = None, output_data: Optional[dict] = None) -> None:
        """Bytes are decoded as UTF-8 with replacement; terminal escapes are stripped from stdout, stderr and
        message (the reference's __post_init__)."""
    def combine_output(self, include_message: bool = True) -> str:
        """``message + '\\n' + stdout + '\\n' + stderr`` when a message is set and include_message, else
        ``stdout + '\\n' + stderr``."""
    @classmethod
    def create(cls, subprocess_result: CompletedProcess, message: Optional[str] = None,
               output_data: Optional[Any] = None) -> ProcessResult:
        """From a subprocess.CompletedProcess (stdout/stderr as bytes, str or None)."""
    @classmethod
    def merge(cls, results: dict[str, ProcessResult]) -> Optional[ProcessResult]:
        """Merges {name: result} in dict order: stdout and stderr joined by '\\n'; the non-empty messages
        joined by '\\n' ('' when none); returncode 0 only when all parts are 0, else the first non-zero (B9
        fixed: the reference's max() lets 0 beat a signal); output_data {name: data} of the parts that have
        one, or None (the reference drops it). None for an empty dict."""
    def encode(self) -> dict:
        """{'returncode', 'stdout', 'stderr', 'message', 'output_data'} (the reference's dataclass dict)."""
    @classmethod
    def decode(cls, data: dict) -> ProcessResult:
        """From encode()'s dict. Raises ParseError (ValueError) for unknown or missing keys and wrong types."""

class BuildResult:
    """The result of a build (spec §3.2)."""

    worker_info: Optional[dict]
    """Host/toolchain facts of the builder (a copy: assign to change it)."""
    result: Optional[ProcessResult]
    """The build process (a live view)."""
    artifacts: Optional[MemoryFileMap]
    """The files the build produced, keyed by path relative to the task tree (a live view)."""

    def __init__(self, worker_info: Optional[dict] = None, result: Optional[ProcessResult] = None,
                 artifacts: Optional[MemoryFileMap] = None) -> None: ...
    @classmethod
    def decode(cls, data: Optional[dict]) -> Optional[BuildResult]:
        """From {'worker_info', 'result', 'artifacts'} (artifacts as a MemoryFileMap encoding); None gives
        None; unknown keys are ignored. Raises ParseError (ValueError) for wrong types."""
    def encode(self) -> dict: ...

class TestResult:
    """The result of the correctness and performance runs (spec §3.3)."""

    worker_info: Optional[dict]
    """Host facts of the tester; {arch: info} after a multi-arch merge (a copy)."""
    correctness_result: Optional[ProcessResult]
    """pytest -m 'not performance' (a live view)."""
    performance_result: Optional[ProcessResult]
    """pytest -m performance; output_data = {'runtimes': {node_id: [ms per trial, ...]}} (a live view)."""
    trace_results: dict[str, ProcessResult]
    """Profiler passes, e.g. {'unitrace.000': ...} (a new dict of views; default {})."""
    results_per_gpu: Optional[dict[str, TestResult]]
    """{arch: TestResult} after a multi-arch merge (kept by decode: B10 fixed)."""

    def __init__(self, worker_info: Optional[dict] = None, correctness_result: Optional[ProcessResult] = None,
                 performance_result: Optional[ProcessResult] = None,
                 trace_results: Optional[dict[str, ProcessResult]] = None,
                 results_per_gpu: Optional[dict[str, TestResult]] = None) -> None: ...
    @classmethod
    def decode(cls, data: Optional[dict]) -> Optional[TestResult]:
        """From encode()'s dict; None gives None. Raises ParseError (ValueError) for wrong types."""
    @classmethod
    def merge(cls, results: dict[str, TestResult]) -> TestResult:
        """Merges {arch: result}: one entry gives (a copy of) itself; otherwise worker_info {arch: info},
        correctness/performance = ProcessResult.merge over the archs that have one, trace keys
        '<name>_<arch>', results_per_gpu = the input."""
    def encode(self) -> dict: ...

class DatabaseTask:
    """The `tasks` row of a task (the reference's db.Task, spec §5.6) as attributes."""

    __tablename__: str
    id: str
    """SHA-256 hash id, 64 lower-case hex characters (Task.hash_id())."""
    task_name: str
    Op_ID: None
    task_origin: str
    config: dict
    Level_ID: None
    task_data: dict
    """MemoryFileMap encoding {path: {'content': base64, 'mode': int, 'mtime': float}}."""
    has_build_step: bool
    correctness_tests: list[str]
    profile_tests: list[str]
    evolve_block: Optional[str]
    reference_block: Optional[str]
    user_instructions_block: Optional[str]
    """blocks_to_str of each key: one block as is, several as '### Block: <path> ###\\n<content>' parts."""
    hyperparameters_buildtime: Optional[dict]
    hyperparameters_runtime: Optional[dict]
    def to_dict(self) -> dict[str, Any]: ...

class Task:
    """A kernel-generation problem: package files, tests, config, blocks and (once evaluated) build and test
    results (spec §3.4). Dict and list fields return copies (assign the attribute to change them); result
    fields and task_data are live views."""

    task_data: MemoryFileMap
    has_build_step: bool
    has_reference_build_step: bool
    correctness_tests: list[str]
    """Test ids relative to task.py, e.g. 'TestX::test_a[512]'."""
    profile_tests: list[str]
    """The @pytest.mark.performance test ids."""
    config: dict
    """The package's config.yaml (legacy keys run_name/Op_Name renamed)."""
    blocks: dict[str, dict[str, list[str]]]
    """{KEY: {path: [content, ...]}} for KEY in REFERENCE, EVOLVE, USER_INSTRUCTIONS (present keys only)."""
    extract_code_result: Optional[ProcessResult]
    build_result: Optional[BuildResult]
    build_result_reference: Optional[BuildResult]
    test_result: Optional[TestResult]
    test_result_reference: Optional[TestResult]
    hyperparameters_buildtime: Optional[dict]
    """Keyword arguments of build()/build_reference() (config hyperparameters.buildtime)."""
    hyperparameters_runtime: Optional[dict]
    """Passed to pytest as --runtime_params=<json> (config hyperparameters.runtime)."""
    hyperparameters: Optional[dict]
    """The wire format's {'buildtime': ..., 'runtime': ...} (encode() key), None when both are None."""

    def __init__(self, task_data: MemoryFileMap, has_build_step: bool, has_reference_build_step: bool,
                 correctness_tests: list[str], profile_tests: list[str], config: dict,
                 blocks: Optional[dict[str, dict[str, list[str]]]] = None,
                 extract_code_result: Optional[ProcessResult] = None, build_result: Optional[BuildResult] = None,
                 build_result_reference: Optional[BuildResult] = None, test_result: Optional[TestResult] = None,
                 test_result_reference: Optional[TestResult] = None,
                 hyperparameters_buildtime: Optional[dict] = None,
                 hyperparameters_runtime: Optional[dict] = None) -> None: ...
    def print_info(self, print_fn: Optional[Callable[[str], Any]] = None) -> None:
        """Prints build flags, tests, config and block files as YAML, one print_fn call per line (default
        print)."""
    def validate(self) -> None:
        """Checks files non-empty, task.py and conftest.py, >= 1 correctness and >= 1 performance test, an
        EVOLVE block, task_name and job_name in config (native tasks: their config checks instead). Raises
        InvalidArgumentError (an AssertionError, like the reference's asserts) listing every problem."""
    @classmethod
    def create(cls, path_or_bytes: Union[str, PathLike, bytes]) -> tuple[Task, dict]:
        """Loads a package: directory, zip or tar[.gz|.bz2|.xz] file (format sniffed), or the bytes of an
        archive (spec §1.2: root dir stripped with B1-B3 fixed, config read, overrides taken out, blocks
        extracted, tests discovered with pytest and cached in $KF_CACHE_DIR by content).
        Returns (task, metadata); metadata = {'overrides': {...}} when the package has an overrides.yml.
        Raises NotFoundError (FileNotFoundError: no such path, no config.yaml), ParseError (ValueError: YAML,
        block markers incl. an unclosed START, non-UTF-8 source), InvalidArgumentError (ValueError and
        RuntimeError: no performance test, task.py that does not collect, two config files)."""
    def with_blocks(self, blocks: Union[dict[str, dict[str, Optional[list[Optional[str]]]]], dict[str, Optional[str]]],
                    keep_test_result_reference: bool = False) -> Task:
        """A new Task with blocks replaced (this one is unchanged). blocks: {KEY: content} when the task has
        exactly one KEY block, else {KEY: {path: [content, ...]}} (block i of path gets contents[i]). None
        anywhere ({'EVOLVE': None}, {'EVOLVE': {'k.cpp': None}}, or inside a list: B11 fixed) gives a task
        without files, the old blocks and extract_code_result returncode 1. Otherwise
        extract_code_result.message = 'Code blocks have been modified successfully.' Build and test results
        are dropped; keep_test_result_reference keeps the reference's build and test results.
        Raises NotFoundError (KeyError: no such block key; AssertionError: block index out of range),
        InvalidArgumentError (ValueError: shorthand for a key with several blocks; a content that contains a
        marker), ParseError (ValueError: malformed markers)."""
    def encode(self) -> dict:
        """The reference's dict, keys in order: task_data (MemoryFileMap encoding), has_build_step,
        has_reference_build_step, correctness_tests, profile_tests, config, blocks, extract_code_result,
        build_result, build_result_reference, test_result, test_result_reference, hyperparameters."""
    @classmethod
    def decode(cls, data: dict) -> Task:
        """From encode()'s dict (or the reference's): task_data, has_build_step, correctness_tests,
        profile_tests, config, blocks required; has_reference_build_step defaults to False. Raises ParseError
        (ValueError) naming the key, UnsafeInputError (ValueError) for a path outside the task."""
    def to_database_task(self) -> Union[DatabaseTask, "kernelfoundry.eval_pipeline.database.tables.Task"]:
        """The `tasks` row (id = hash_id()): a database.tables.Task (SQLAlchemy model, for
        database.add_ignore_errors) when SQLAlchemy is installed, else a DatabaseTask with the same attributes.
        Raises NotFoundError (KeyError) when config lacks task_name or task_origin."""
    def hash_id(self) -> str:
        """SHA-256 over the base64 contents in sorted path order, config.yaml/.yml excluded (64 hex chars)."""
    def apply_config(self, config: dict) -> None:
        """Sets config; copies has_build_step, has_reference_build_step and hyperparameters when present."""
