"""Build target script (reference spec §4.3 item 7).

    python -m kernelfoundry.build_target --config input.json --build_function build|build_reference \
        --output artifacts.json

Run with the task directory as the working directory. It imports ``task.py`` from there, picks the
``TestBase`` subclass DEFINED in task.py (not an imported helper base, not the alphabetically first class;
among several, the first one in definition order that overrides the requested hook), instantiates it without
arguments and calls ``hook(gpu_arch=<config gpu_arch>, **<config hyperparameters.buildtime>)``. It writes
``{"artifacts": <return value>}`` (paths as strings, or null) to ``--output`` atomically (temp + rename).
Any failure exits non-zero with a traceback on stderr; a build time limit that fired (compiler.BuildTimeout)
exits with 124 (BUILD_TIMEOUT_EXIT) after the line ``kernelfoundry: build timed out: <limit> of <n> s``.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import os
import sys
import tempfile
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any, Optional

from . import CustomTest, TestBase
from .compiler import BUILD_TIMEOUT_EXIT, BuildTimeout

__all__ = ["main", "load_task_module", "find_task_class", "run_build"]

HOOKS = ("build", "build_reference")


def load_task_module(task_dir: Path) -> ModuleType:
    """Imports ``<task_dir>/task.py`` as module ``task`` (task_dir first on sys.path, as pytest would)."""
    path = task_dir / "task.py"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no task.py in the build directory")
    if str(task_dir) not in sys.path:
        sys.path.insert(0, str(task_dir))
    spec = importlib.util.spec_from_file_location("task", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["task"] = module
    spec.loader.exec_module(module)
    return module


def find_task_class(module: ModuleType, hook: str) -> type:
    """The task's test class: a proper TestBase subclass whose ``__module__`` is ``module`` (defined there).
    Prefers, in definition order, a class that overrides ``hook``; else the first such class.
    Raises RuntimeError when task.py defines none."""
    own = [obj for obj in vars(module).values()
           if inspect.isclass(obj) and issubclass(obj, TestBase) and obj not in (TestBase, CustomTest)
           and obj.__module__ == module.__name__]
    if not own:
        raise RuntimeError(f"task.py defines no subclass of kernelfoundry.TestBase (needed for '{hook}')")
    for cls in own:
        if getattr(cls, hook) is not getattr(TestBase, hook):
            return cls
    return own[0]


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    raise TypeError(f"build hook returned a {type(value).__name__}; expected a list of paths or None")


def run_build(config: dict, build_function: str, task_dir: Path) -> Optional[list]:
    """Imports the task, calls the hook and returns its (JSON-able) result."""
    if build_function not in HOOKS:
        raise ValueError(f"--build_function must be one of {HOOKS}, got {build_function!r}")
    gpu_arch = config.get("gpu_arch")
    hyper = config.get("hyperparameters") or {}
    if not isinstance(hyper, dict):
        raise ValueError("input config: 'hyperparameters' must be an object or null")
    buildtime = hyper.get("buildtime") or {}
    if not isinstance(buildtime, dict):
        raise ValueError("input config: 'hyperparameters.buildtime' must be an object or null")
    cls = find_task_class(load_task_module(task_dir), build_function)
    hook = getattr(cls(), build_function)
    return _jsonable(hook(gpu_arch=gpu_arch, **buildtime))


def write_json_atomic(path: Path, data: Any) -> None:
    """Writes JSON (indent 4) to a temp file beside ``path`` and renames it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=4)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernelfoundry.build_target", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="input.json: {gpu_arch, hyperparameters}")
    parser.add_argument("--build_function", required=True, choices=HOOKS)
    parser.add_argument("--output", required=True, help="artifacts.json to write")
    args = parser.parse_args(argv)
    with open(args.config, encoding="utf-8") as f:
        config = json.load(f)
    if not isinstance(config, dict):
        raise ValueError(f"{args.config}: expected a JSON object")
    output = Path(args.output).resolve()  # resolved before the task may chdir
    try:
        artifacts = run_build(config, args.build_function, Path.cwd())
    except BuildTimeout as e:
        # A time limit fired inside the build (compile_torch_extension): a typed exit code and one marker
        # line, so kf scores build_timeout naming the limit instead of a build error.
        traceback.print_exc()
        print(f"kernelfoundry: build timed out: {e.limit} of {e.limit_s:g} s", file=sys.stderr, flush=True)
        return BUILD_TIMEOUT_EXIT
    write_json_atomic(output, {"artifacts": artifacts})
    return 0


if __name__ == "__main__":
    sys.exit(main())
