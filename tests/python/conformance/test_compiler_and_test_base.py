"""Conformance: kernelfoundry.compiler's TorchCompiler / IcpxCompiler (docs/api/public.rst "Compilers"; the
failed_phase facts of the reference's tests/test_compile_error_honesty.py) and the task base class
kernelfoundry.TestBase / kernelfoundry.custom_test.CustomTest (build hooks, compile_torch_extension,
get_machine_gpu_arch, validate)."""

from __future__ import annotations

import inspect
import shutil
from pathlib import Path

import pytest

import kernelfoundry
from compat_util import REQUIRED, assert_signature_starts_with, params
from kernelfoundry import compiler
from kernelfoundry.compiler import IcpxCompiler, TorchCompiler

OK_SOURCE = """#include <pybind11/pybind11.h>
static int answer() { return 42; }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("answer", &answer); }
"""
NO_MODULE_SOURCE = "int not_a_module() { return 1; }\n"  # compiles and links; nothing registers the module
BROKEN_SOURCE = "this is not C++;\n"


# ---- TorchCompiler.failed_phase (test_compile_error_honesty.py, TestFailedPhase) ----

def test_success_has_no_failed_phase():
    assert TorchCompiler.failed_phase(0) is None


def test_import_failure_is_the_load_phase():
    assert TorchCompiler.failed_phase(TorchCompiler.LOAD_FAILED_RETURNCODE) == "load"


@pytest.mark.parametrize("returncode", [1, 2, -1, 255])
def test_anything_else_is_the_compile_phase(returncode):
    assert TorchCompiler.failed_phase(returncode) == "compile"


def test_the_load_code_does_not_collide_with_ordinary_failures():
    assert TorchCompiler.LOAD_FAILED_RETURNCODE not in (0, 1, 2)
    assert TorchCompiler.LOAD_FAILED_RETURNCODE == compiler.LOAD_FAILED_EXIT == 87


def test_constructor_signature_and_hierarchy():
    for cls in (TorchCompiler, IcpxCompiler):
        assert issubclass(cls, compiler.BaseKernelCompiler)
        assert_signature_starts_with(cls.__init__, [("self", REQUIRED), ("extension_name", REQUIRED),
                                                    ("src", REQUIRED), ("build_dir", REQUIRED),
                                                    ("gpu_arch", REQUIRED), ("timeout", 120), ("verbose", False)])
    assert inspect.isabstract(compiler.BaseKernelCompiler)


# ---- compile() results: the status dict and its phase ----

def _compile(tmp_path: Path, source: str, name: str = "conf_ext", **kwargs) -> tuple[dict, Path]:
    src = tmp_path / f"{name}.cpp"
    src.write_text(source)
    build_dir = tmp_path / "build"
    status = TorchCompiler(extension_name=name, src=str(src), build_dir=str(build_dir), gpu_arch="cpu",
                           **kwargs).compile()
    assert set(status) >= {"stdout", "stderr", "returncode", "phase"}, status
    return status, build_dir


def test_compile_success_builds_the_module_in_build_dir(tmp_path):
    status, build_dir = _compile(tmp_path, OK_SOURCE, timeout=600)
    assert status["returncode"] == 0 and status["phase"] is None, status["stdout"][-3000:] + status["stderr"]
    built = compiler.find_built_extension(build_dir, "conf_ext")
    assert built == build_dir / "conf_ext.so" and built.is_file()


def test_compile_error_is_the_compile_phase_with_the_compiler_output(tmp_path):
    status, _ = _compile(tmp_path, BROKEN_SOURCE, timeout=600)
    assert status["returncode"] not in (0, TorchCompiler.LOAD_FAILED_RETURNCODE)
    assert status["phase"] == "compile" and TorchCompiler.failed_phase(status["returncode"]) == "compile"
    assert "error" in status["stdout"].lower() and "compilation failed" in status["stderr"]


def test_a_module_that_will_not_import_is_the_load_phase(tmp_path):
    status, _ = _compile(tmp_path, NO_MODULE_SOURCE, timeout=600)
    assert status["returncode"] == TorchCompiler.LOAD_FAILED_RETURNCODE, status
    assert status["phase"] == "load" and "would not import" in status["stderr"]
    assert "PyInit_conf_ext" in status["stdout"]


def test_a_time_limit_gives_a_killed_returncode(tmp_path):
    status, _ = _compile(tmp_path, OK_SOURCE, name="slow_ext", timeout=0.2)
    assert status["returncode"] == -9 and "Compilation timed out" in status["stderr"]
    assert status["phase"] == "compile"


def test_missing_source_and_missing_icpx_are_failures_not_exceptions(tmp_path):
    status = TorchCompiler("x", str(tmp_path / "none.cpp"), str(tmp_path / "b"), "cpu").compile()
    assert status["returncode"] == 1 and "not found" in status["stderr"]
    if shutil.which("icpx") is None:
        src = tmp_path / "k.sycl"
        src.write_text("int main() {}\n")
        status = IcpxCompiler("k", str(src), str(tmp_path / "b2"), "bmg").compile()
        assert status["returncode"] == 1 and status["phase"] == "compile" and "icpx" in status["stderr"]


def test_find_built_extension_names_what_it_found(tmp_path):
    (tmp_path / "other.txt").write_text("")
    with pytest.raises(FileNotFoundError, match="other.txt"):
        compiler.find_built_extension(tmp_path, "missing")
    assert compiler.extension_suffix() == ".so" or compiler.extension_suffix().endswith(".so")


# ---- TestBase / CustomTest ----

def test_one_base_class_under_every_documented_name():
    from kernelfoundry.custom_test import CustomTest
    from kernelfoundry.test_base import TestBase
    assert kernelfoundry.TestBase is TestBase is CustomTest is kernelfoundry.CustomTest


def test_test_base_members():
    tb = kernelfoundry.TestBase
    assert params(tb.build)[:2] == [("self", REQUIRED), ("gpu_arch", REQUIRED)]
    assert params(tb.build_reference)[:2] == [("self", REQUIRED), ("gpu_arch", REQUIRED)]
    for name in ("compile_torch_extension", "get_machine_gpu_arch", "validate"):
        assert isinstance(inspect.getattr_static(tb, name), staticmethod), name
    assert_signature_starts_with(tb.compile_torch_extension, [
        ("extension_name", REQUIRED), ("src", REQUIRED), ("output_dir", REQUIRED), ("gpu_arch", REQUIRED)])
    assert [n for n, _ in params(tb.compile_torch_extension)][4:6] == ["timeout", "backend"]
    assert tb.validate() is None

    class Builds(tb):
        def build(self, gpu_arch, **buildtime_params):
            return ["x.so"]

    assert Builds._has_build_override() and not tb._has_build_override()
    assert tb().build("cpu", tile=4) is None and tb().build_reference("cpu") is None


def test_compile_torch_extension_is_callable_on_the_class(tmp_path):
    src = tmp_path / "tb_ext.cpp"
    src.write_text(OK_SOURCE)
    out = kernelfoundry.TestBase.compile_torch_extension("tb_ext", src, tmp_path / "out", "cpu", timeout=600)
    assert out == [str((tmp_path / "out" / "tb_ext.so").resolve())] and Path(out[0]).is_file()
    bad = tmp_path / "tb_bad.cpp"
    bad.write_text(NO_MODULE_SOURCE)
    with pytest.raises(RuntimeError, match="compiled but failed to load.*PyInit_tb_bad"):
        kernelfoundry.TestBase.compile_torch_extension("tb_bad", bad, tmp_path / "out", "cpu", timeout=600)


def test_get_machine_gpu_arch(monkeypatch):
    from kernelfoundry.utils import sysinfo
    monkeypatch.setattr(sysinfo, "select_intel_gpu", lambda: None)
    monkeypatch.setattr(sysinfo, "get_nvidia_compute_capabilities", lambda: [])
    assert kernelfoundry.TestBase.get_machine_gpu_arch() == "cpu"  # kf: the host, where the reference raised
    monkeypatch.setattr(sysinfo, "get_nvidia_compute_capabilities", lambda: ["7.5", "8.6"])
    assert kernelfoundry.TestBase.get_machine_gpu_arch() == "7.5 8.6"
    monkeypatch.setattr(sysinfo, "select_intel_gpu", lambda: (Path("/sys/class/drm/card1"), "0xe20b", "0000:03:00.0"))
    assert kernelfoundry.TestBase.get_machine_gpu_arch() == "0xe20b"  # Intel first
