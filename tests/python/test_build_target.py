"""python -m kernelfoundry.build_target (spec §4.3 item 7) and compile_torch_extension errors."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from conftest import run_py, write_task
from kernelfoundry import compile_torch_extension

HELPERS = textwrap.dedent('''
    from kernelfoundry import TestBase

    class AaaHelperBase(TestBase):
        """Imported helper base: alphabetically first, must NOT be picked."""
        def build(self, gpu_arch, **kw):
            return ["wrong.txt"]
''')

TASK = textwrap.dedent('''
    from pathlib import Path
    from kernelfoundry import TestBase, CustomTest
    from helpers import AaaHelperBase

    class TestZzzTask(AaaHelperBase):
        def build(self, gpu_arch, **buildtime):
            out = Path(__file__).parent / "out.txt"
            out.write_text(f"{gpu_arch} {sorted(buildtime.items())}")
            return [out, "rel/other.bin"]

        def build_reference(self, gpu_arch, **buildtime):
            raise RuntimeError("reference build exploded")
''')


def build(task_dir: Path, function: str, config: dict):
    (task_dir / "input.json").write_text(json.dumps(config))
    return run_py(["-m", "kernelfoundry.build_target", "--config", "input.json", "--build_function", function,
                   "--output", "out/artifacts.json"], cwd=task_dir)


def test_picks_the_class_defined_in_task_py_and_passes_buildtime(tmp_path):
    task = write_task(tmp_path / "t", TASK, {"helpers.py": HELPERS})
    r = build(task, "build", {"gpu_arch": "bmg", "hyperparameters": {"buildtime": {"tile": 16, "vec": 4},
                                                                    "runtime": {"x": 1}}})
    assert r.returncode == 0, r.stderr
    data = json.loads((task / "out" / "artifacts.json").read_text())
    assert data == {"artifacts": [str(task / "out.txt"), "rel/other.bin"]}
    assert (task / "out.txt").read_text() == "bmg [('tile', 16), ('vec', 4)]"
    assert not list((task / "out").glob("*.tmp"))  # written via temp + rename


def test_default_hook_returns_null_and_failures_exit_nonzero(tmp_path):
    task = write_task(tmp_path / "t", "from kernelfoundry import TestBase\nclass TestX(TestBase):\n    pass\n")
    r = build(task, "build_reference", {"gpu_arch": "cpu", "hyperparameters": None})
    assert r.returncode == 0, r.stderr
    assert json.loads((task / "out" / "artifacts.json").read_text()) == {"artifacts": None}

    task2 = write_task(tmp_path / "t2", TASK, {"helpers.py": HELPERS})
    r = build(task2, "build_reference", {"gpu_arch": "cpu"})
    assert r.returncode != 0 and "reference build exploded" in r.stderr
    assert not (task2 / "out" / "artifacts.json").exists()

    task3 = write_task(tmp_path / "t3", "from kernelfoundry import TestBase, CustomTest\n")
    r = build(task3, "build", {"gpu_arch": "cpu"})
    assert r.returncode != 0 and "defines no subclass of kernelfoundry.TestBase" in r.stderr


def test_compile_torch_extension_reports_compiler_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("KF_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "broken.cpp"
    src.write_text("this is not C++;\n")  # fails fast: no torch headers to parse first
    with pytest.raises(RuntimeError, match=r"failed to compile torch extension 'broken'[\s\S]*error"):
        compile_torch_extension("broken", src, tmp_path / "out", "cpu", timeout=600)
    assert not (tmp_path / "out" / "broken.so").exists()
    with pytest.raises(RuntimeError, match="timed out after 0.2 s"):
        compile_torch_extension("slow", src, tmp_path / "out", "cpu", timeout=0.2)  # torch import alone is slower
    with pytest.raises(ValueError, match="unknown backend"):
        compile_torch_extension("broken", src, tmp_path / "out", "cpu", backend="nvcc")
    with pytest.raises(ValueError, match="does not exist"):
        compile_torch_extension("missing", tmp_path / "nope.cpp", tmp_path / "out", "cpu")
