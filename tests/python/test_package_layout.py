"""The package's split by trust (python/README.md) and its import graph: the task directory holds no host module and
cannot import one; the host directory alone is the README's one-step setup of the Python API (and joins the task
side in any order); every module imports alone; no module imports another that imports it back (statically, function
level imports included)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PYTHON_DIR, REPO, TASK_PYTHON_DIR

#: Host-side modules (python/host/kernelfoundry): never importable in a task's process.
HOST_MODULES = ("kernelfoundry.zygote", "kernelfoundry._contain", "kernelfoundry.pch_build",
                "kernelfoundry.eval_pipeline._core", "kernelfoundry.eval_pipeline.task",
                "kernelfoundry.eval_pipeline.evaluation", "kernelfoundry.eval_pipeline.store",
                "kernelfoundry.eval_pipeline.errors", "kernelfoundry.eval_pipeline.database",
                "kernelfoundry.eval_pipeline.utils.memory_file_map", "kernelfoundry.eval_pipeline.utils.custom_task_helper")


def _modules(root: Path) -> dict[str, Path]:
    """{module name: source file} of the kernelfoundry portion under `root` (a sys.path entry)."""
    out = {}
    for path in sorted((root / "kernelfoundry").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _python(code: str, *path: Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "KF_PYTHON"))}
    env["PYTHONPATH"] = os.pathsep.join(map(str, path))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                          cwd=cwd or "/")


def test_the_task_directory_holds_no_host_module_and_the_host_directory_no_task_module():
    task, host = _modules(TASK_PYTHON_DIR), _modules(PYTHON_DIR)
    assert not set(task) & set(host) - {"kernelfoundry"}, set(task) & set(host)  # each module lives on one side
    for name in HOST_MODULES:
        assert name not in task
    assert not list((TASK_PYTHON_DIR / "kernelfoundry").rglob("_core*.so"))
    assert not list((TASK_PYTHON_DIR / "kernelfoundry").rglob("_contain*.so"))
    assert "kernelfoundry.zygote" in host and "kernelfoundry.warm_client" in task  # the client runs in the run


def test_a_process_with_the_task_directory_cannot_import_the_host_side():
    code = ("import importlib, json, sys\n"
            "out = {}\n"
            f"for name in {HOST_MODULES!r}:\n"
            "    try:\n"
            "        importlib.import_module(name)\n"
            "        out[name] = 'imported'\n"
            "    except ImportError as e:\n"
            "        out[name] = type(e).__name__\n"
            "import kernelfoundry.eval_pipeline.utils.performance as p, kernelfoundry.eval_pipeline as ep\n"
            "out['performance'] = p.__name__\n"
            "try:\n"
            "    ep.Task\n"
            "except ImportError as e:\n"
            "    out['Task'] = 'host side' if 'host side' in str(e) else str(e)\n"
            "out['path'] = [list(m.__path__) for m in (sys.modules['kernelfoundry'], ep)]\n"
            "print(json.dumps(out))\n")
    r = _python(code, TASK_PYTHON_DIR)
    assert r.returncode == 0, r.stderr
    import json
    out = json.loads(r.stdout)
    for name in HOST_MODULES:
        assert out[name] == "ModuleNotFoundError", (name, out[name])
    assert out["performance"] == "kernelfoundry.utils.performance"  # the reference's path works in a task run
    assert out["Task"] == "host side"
    assert out["path"] == [[str(TASK_PYTHON_DIR / "kernelfoundry")],
                           [str(TASK_PYTHON_DIR / "kernelfoundry" / "eval_pipeline")]]


def test_the_readme_setup_the_host_directory_alone_gives_the_whole_package():
    # README "Python API": `export PYTHONPATH=$PWD/build/python`, then these imports and a Task.
    code = ("from kernelfoundry.eval_pipeline import evaluate, open_store\n"
            "from kernelfoundry.eval_pipeline.task import Task\n"
            "from kernelfoundry.eval_pipeline.utils.custom_task_helper import get_block\n"
            "from kernelfoundry.eval_pipeline.utils.memory_file_map import MemoryFileMap\n"
            "from kernelfoundry.eval_pipeline.utils.performance import measure_runtime\n"
            "import kernelfoundry, kernelfoundry.zygote, kernelfoundry._contain\n"
            "from kernelfoundry import TestBase\n"
            "task, metadata = Task.create('examples/tasks/omp_reduction')\n"
            "print(kernelfoundry.__file__)\n"
            "print(sorted(kernelfoundry.__path__))\n"
            "print(task.hash_id() == Task.decode(task.encode()).hash_id())\n")
    r = _python(code, PYTHON_DIR, cwd=REPO)
    assert r.returncode == 0, r.stderr
    file, paths, same = r.stdout.splitlines()
    assert file == str(TASK_PYTHON_DIR / "kernelfoundry" / "__init__.py")  # one package: the task side's
    assert paths == str(sorted([str(TASK_PYTHON_DIR / "kernelfoundry"), str(PYTHON_DIR / "kernelfoundry")]))
    assert same == "True"


@pytest.mark.parametrize("order", ["task first", "host first"])
def test_both_directories_join_in_either_order(order):
    path = [TASK_PYTHON_DIR, PYTHON_DIR] if order == "task first" else [PYTHON_DIR, TASK_PYTHON_DIR]
    r = _python("import kernelfoundry, kernelfoundry.zygote as z, kernelfoundry.eval_pipeline.task as t, "
                "kernelfoundry.measure as m\nprint(kernelfoundry.__file__, z.__file__, t.__file__, m.__file__)", *path)
    assert r.returncode == 0, r.stderr
    init, zygote, task, measure = r.stdout.split()
    assert init == str(TASK_PYTHON_DIR / "kernelfoundry" / "__init__.py")
    assert zygote.startswith(str(PYTHON_DIR / "kernelfoundry")) and task.startswith(str(PYTHON_DIR / "kernelfoundry"))
    assert measure.startswith(str(TASK_PYTHON_DIR / "kernelfoundry"))


def _side_modules():
    return [(name, "task") for name in _modules(TASK_PYTHON_DIR)] + \
           [(name, "host") for name in _modules(PYTHON_DIR) if name != "kernelfoundry"]


@pytest.mark.parametrize("name,side", _side_modules())
def test_every_module_imports_alone(name, side):
    """Each module in a fresh interpreter: task modules with the task directory only (as in a task run), host
    modules with the host directory only (the README's setup)."""
    if name == "kernelfoundry.eval_pipeline.database":
        pytest.importorskip("sqlalchemy")
    r = _python(f"import importlib; importlib.import_module({name!r})",
                TASK_PYTHON_DIR if side == "task" else PYTHON_DIR)
    assert r.returncode == 0, r.stderr


def _imports(name: str, path: Path, is_package: bool, known: set[str]) -> set[str]:
    """The kernelfoundry modules `name`'s source imports (anywhere in it, functions included): ``from P import X``
    is an edge to the submodule P.X when there is one, else to P (X is a name P's code defines)."""
    out = set()
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                if target in known:
                    out.add(target)
    out.discard(name)
    return out


def test_the_import_graph_has_no_cycle():
    sources = {**_modules(TASK_PYTHON_DIR), **_modules(PYTHON_DIR)}
    sources["kernelfoundry"] = TASK_PYTHON_DIR / "kernelfoundry" / "__init__.py"
    known = set(sources)
    graph = {n: _imports(n, p, p.name == "__init__.py", known) for n, p in sources.items()}
    cycles, state = [], {}

    def visit(n, stack):
        state[n] = "open"
        stack.append(n)
        for t in sorted(graph[n]):
            if state.get(t) == "open":
                cycles.append(stack[stack.index(t):] + [t])
            elif t not in state:
                visit(t, stack)
        stack.pop()
        state[n] = "done"

    for n in sorted(graph):
        if n not in state:
            visit(n, [])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)
    # The graph is real: the edges this test exists for are seen.
    assert "kernelfoundry.fork_server" in graph["kernelfoundry.executor"]
    assert "kernelfoundry.executor" not in graph["kernelfoundry.fork_server"]
    assert "kernelfoundry.forked" in graph["kernelfoundry.compiler"]


def test_the_cycle_check_sees_a_cycle(tmp_path):
    (tmp_path / "kernelfoundry").mkdir()
    (tmp_path / "kernelfoundry" / "a.py").write_text("def f():\n    from . import b\n")
    (tmp_path / "kernelfoundry" / "b.py").write_text("from .a import f\n")
    mods = _modules(tmp_path)
    known = set(mods)
    assert _imports("kernelfoundry.a", mods["kernelfoundry.a"], False, known) == {"kernelfoundry.b"}
    assert _imports("kernelfoundry.b", mods["kernelfoundry.b"], False, known) == {"kernelfoundry.a"}
