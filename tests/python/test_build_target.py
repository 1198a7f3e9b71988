"""python -m kernelfoundry.build_target (spec §4.3 item 7) and compile_torch_extension errors."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import run_py, write_task
from kernelfoundry import compile_torch_extension
from kernelfoundry import compiler
from kernelfoundry.compiler import BUILD_TIMEOUT_EXIT, BuildTimeout

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


def test_compile_torch_extension_reports_compiler_errors(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.delenv("KF_BUILD_DEADLINE", raising=False)
    src = tmp_path / "broken.cpp"
    src.write_text("this is not C++;\n")  # fails fast: no torch headers to parse first
    with pytest.raises(RuntimeError, match=r"failed to compile torch extension 'broken'[\s\S]*error"):
        compile_torch_extension("broken", src, tmp_path / "out", "cpu", timeout=600)
    assert not (tmp_path / "out" / "broken.so").exists()
    # The compiler's output streamed to our stdout as it came (issue 10 fault 6), not only into the message.
    assert "this is not C++" in capfd.readouterr().out
    # No cache of its own and nothing left behind: the private build dir is gone.
    assert list((tmp_path / "tmp").iterdir()) == []
    with pytest.raises(BuildTimeout, match=r"timed out after 0.2 s \(timeout argument\)") as info:
        compile_torch_extension("slow", src, tmp_path / "out", "cpu", timeout=0.2)  # torch import alone is slower
    assert info.value.limit == "timeout argument" and info.value.limit_s == 0.2
    with pytest.raises(ValueError, match="unknown backend"):
        compile_torch_extension("broken", src, tmp_path / "out", "cpu", backend="nvcc")
    with pytest.raises(ValueError, match="does not exist"):
        compile_torch_extension("missing", tmp_path / "nope.cpp", tmp_path / "out", "cpu")


# ---- issue 10 fault 6: the task's build_timeout governs nested compiles; output streams ----

def test_timeout_none_is_the_build_budget_from_kf(monkeypatch):
    now = time.clock_gettime(time.CLOCK_MONOTONIC)
    monkeypatch.setenv("KF_BUILD_DEADLINE", f"{now + 240:.3f}")
    monkeypatch.setenv("KF_BUILD_TIMEOUT", "240")
    seconds, limit, limit_s = compiler._effective_timeout(None)
    assert limit == "build_timeout" and limit_s == 240.0
    assert 240 < seconds <= 245.5  # kf kills at the deadline; ours is a backstop a little later
    # The old 120 s default no longer applies; an explicit value below the budget is the task's own limit.
    assert compiler._effective_timeout(120) == (120.0, "timeout argument", 120.0)
    assert compiler._effective_timeout(10_000)[1] == "build_timeout"
    monkeypatch.delenv("KF_BUILD_DEADLINE")
    assert compiler._effective_timeout(None) == (compiler.DEFAULT_TIMEOUT_S, "default timeout", 600.0)


def test_silent_but_busy_build_prints_heartbeats_and_a_sleeping_one_does_not(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KF_BUILD_INACTIVITY_TIMEOUT", "1.5")  # heartbeat every 0.5 s of silence
    busy = [sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 2.5: pass"]
    rc, _ = compiler._run_child(busy, dict(os.environ), tmp_path, 30, "build_timeout", 30)
    assert rc == 0
    assert "kernelfoundry: still compiling" in capsys.readouterr().out
    sleepy = [sys.executable, "-c", "import time; time.sleep(2.5)"]
    rc, _ = compiler._run_child(sleepy, dict(os.environ), tmp_path, 30, "build_timeout", 30)
    assert rc == 0
    assert "still compiling" not in capsys.readouterr().out
    with pytest.raises(BuildTimeout, match=r"after 240 s \(build_timeout\)"):
        compiler._run_child([sys.executable, "-c", "import time; time.sleep(30)"], dict(os.environ), tmp_path, 0.5,
                            "build_timeout", 240)


def test_a_forked_build_child_gets_cwd_env_and_output_like_a_fresh_one_and_dies_at_its_limit(tmp_path, capsys):
    # The warm path of _build_torch (torch imported here already): the child is forked, not a new interpreter.
    def work():
        print("cwd", os.getcwd(), "env", os.environ.get("ONLY"), "session", os.getsid(0) == os.getpid())
        print("to stderr", file=sys.stderr)
        return 3

    rc, tail = compiler._run_child(work, {"ONLY": "this"}, tmp_path, 30, "build_timeout", 30)
    assert rc == 3
    assert f"cwd {tmp_path} env this session True" in tail and "to stderr" in tail
    assert "to stderr" in capsys.readouterr().out  # streamed as it came
    grandchild = tmp_path / "grandchild.pid"

    def hang():  # a compiler that hangs, started by the child: both die at the limit
        import subprocess as sp
        p = sp.Popen(["sleep", "60"])
        grandchild.write_text(str(p.pid))
        time.sleep(60)
        return 0

    with pytest.raises(BuildTimeout, match=r"after 7 s \(build_timeout\)"):
        compiler._run_child(hang, dict(os.environ), tmp_path, 1.0, "build_timeout", 7)
    pid = int(grandchild.read_text())
    time.sleep(0.2)
    assert not Path(f"/proc/{pid}").exists() or " Z " in Path(f"/proc/{pid}/stat").read_text()


def test_a_build_limit_inside_the_hook_exits_124_naming_it(tmp_path):
    task = write_task(tmp_path / "t", textwrap.dedent('''
        from kernelfoundry import TestBase
        from kernelfoundry.compiler import BuildTimeout
        class TestX(TestBase):
            def build(self, gpu_arch, **kw):
                raise BuildTimeout("compilation timed out after 120 s (timeout argument)", 120.0, "timeout argument")
    '''))
    r = build(task, "build", {"gpu_arch": "cpu"})
    assert r.returncode == BUILD_TIMEOUT_EXIT == 124, r.stderr
    assert "kernelfoundry: build timed out: timeout argument of 120 s" in r.stderr
    assert not (task / "out" / "artifacts.json").exists()


@pytest.mark.parametrize("gpu_arch, expected", [
    ("90", "9.0"), ("sm_90", "9.0"), ("compute_90", "9.0"), ("9.0", "9.0"), ("90a", "9.0a"), ("SM_90A", "9.0a"),
    ("100", "10.0"), ("8.6+PTX", "8.6+PTX"), ("80,90", "8.0;9.0"), ("80, 86", "8.0;8.6"), ("Hopper", "Hopper"),
    ("Ampere,90", "Ampere;9.0"), ("hopper", "Hopper"), ("A100", "8.0"), ("l40s", "8.9"),
])
def test_torch_cuda_arch_list_spells_capabilities_as_torch_does(gpu_arch, expected):
    assert compiler.torch_cuda_arch_list(gpu_arch) == expected


@pytest.mark.parametrize("gpu_arch, gencode", [("86", "-gencode=arch=compute_86,code=sm_86"),
                                               ("sm_80", "-gencode=arch=compute_80,code=sm_80")])
def test_torch_accepts_the_arch_list_that_compile_torch_extension_exports(monkeypatch, gpu_arch, gencode):
    """Regression (2026-12-07): gpu_arch "90" was exported verbatim and torch.utils.cpp_extension refused it
    ("Unknown CUDA arch (90) or GPU not supported") before compiling a CUDA extension. Checked with torch's own
    validator on capabilities that every torch knows (Debian's 1.13 has no 9.0)."""
    cpp_extension = pytest.importorskip("torch.utils.cpp_extension")
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", gpu_arch)
    with pytest.raises(ValueError, match="Unknown CUDA arch"):
        cpp_extension._get_cuda_arch_flags()
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", compiler.torch_cuda_arch_list(gpu_arch))
    assert gencode in cpp_extension._get_cuda_arch_flags()
