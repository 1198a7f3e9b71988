"""kernelfoundry.pch (task side) and kernelfoundry.pch_build (host side): the precompiled torch header's flag
allow-list, key, lookup/request protocol and the refusals of the trusted build (the real compile is covered end to end by the C++ build-stage test)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kernelfoundry import pch, pch_build


@pytest.mark.parametrize("flag", ["-O3", "-O2", "-Ofast", "-std=c++17", "-DNDEBUG", "-DN=4", "-UFOO", "-fopenmp",
                                  "-fno-math-errno", "-ffast-math", "-march=native", "-mavx2", "-g", "-Wall",
                                  "-Wno-unused-variable", "-w", "-pthread"])
def test_code_generation_flags_are_allowed(flag):
    assert pch.allowed_flag(flag)


@pytest.mark.parametrize("flag", ["-fplugin=/tmp/evil.so", "-fplugin-arg-x-y=1", "-I/tmp/w", "-isystem", "-include",
                                  "x.h", "-specs=/tmp/s", "-B/tmp", "-Wl,-rpath,/tmp", "-Wp,-MD,/tmp/x",
                                  "-Wa,--defsym,x=1", "@/tmp/args", "-fdump-tree-all", "-fprofile-generate",
                                  "-fstack-usage", "-DX=$(id)", "-DX=`id`", "-D X", "-o", "/tmp/out", "--param=x=1",
                                  "-fpch-preprocess", "-imacros", "-save-temps"])
def test_flags_that_read_write_or_load_are_refused(flag):
    assert not pch.allowed_flag(flag)


def test_key_depends_on_flags_compiler_and_nothing_random(monkeypatch):
    a = pch.key(["-O3"])
    assert a is not None and len(a) == 64
    assert pch.key(["-O3"]) == a
    assert pch.key(["-O2"]) != a
    assert pch.key(["-O3", "-fopenmp"]) != a
    monkeypatch.setenv("CXX", "gcc")  # another compiler binary
    assert pch.key(["-O3"]) != a


def test_only_sources_that_include_torch_want_the_header(tmp_path):
    """The PCH is -include-d only into builds whose sources (or the local headers they include) include torch:
    forced into a pybind11-only module it cost ~20 s of compile for nothing (conformance tests, 2026-12-07)."""
    (tmp_path / "plain.cpp").write_text("#include <pybind11/pybind11.h>\nint answer() { return 42; }\n")
    (tmp_path / "ext.cpp").write_text("#include <torch/extension.h>\n")
    (tmp_path / "aten.cpp").write_text("  #  include <ATen/ATen.h>\n")
    (tmp_path / "via_header.cpp").write_text('#include "inc/kernel.h"\n')
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "kernel.h").write_text('#include "../deeper.h"\n')
    (tmp_path / "deeper.h").write_text("#include <c10/util/Half.h>\n")
    (tmp_path / "commented.cpp").write_text("// #include <torch/extension.h>\n#include \"commented.cpp\"\n")
    assert not pch.uses_torch_headers([tmp_path / "plain.cpp"])
    assert not pch.uses_torch_headers([tmp_path / "commented.cpp"])  # and the include cycle ends
    for name in ("ext.cpp", "aten.cpp", "via_header.cpp"):
        assert pch.uses_torch_headers([tmp_path / name]), name
    assert pch.uses_torch_headers([tmp_path / "plain.cpp", tmp_path / "ext.cpp"])
    assert not pch.uses_torch_headers([tmp_path / "via_header.cpp"], depth=1)
    assert pch.uses_torch_headers([tmp_path / "missing.cpp"])  # unreadable: as before, with the header


def test_lookup_requests_a_missing_header_then_uses_a_published_one(tmp_path, monkeypatch):
    root, requests = tmp_path / "pch", tmp_path / "work" / "requests"
    monkeypatch.setenv("KF_TORCH_PCH_DIR", str(root))
    monkeypatch.setenv("KF_TORCH_PCH_REQUESTS", str(requests))
    extra, note = pch.lookup(["-O3", "-fopenmp"])
    k = pch.key(["-O3", "-fopenmp"])
    assert extra is None and note == f"no precompiled header yet: requested {k[:16]}"
    assert json.loads((requests / f"{k}.json").read_text()) == {"extra_cflags": ["-O3", "-fopenmp"]}
    # kf published it (here by hand): the compile gets -include with the header beside its .gch.
    (root / k).mkdir(parents=True)
    (root / k / pch.HEADER).write_text("#pragma once\n")
    (root / k / (pch.HEADER + ".gch")).write_bytes(b"gpch")
    extra, note = pch.lookup(["-O3", "-fopenmp"])
    assert extra == ["-include", str(root / k / pch.HEADER), "-Winvalid-pch"]
    assert note == f"precompiled header {k[:16]}"


def test_lookup_without_kf_or_with_a_refused_flag_changes_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("KF_TORCH_PCH_DIR", raising=False)
    assert pch.lookup(["-O3"]) == (None, "")
    monkeypatch.setenv("KF_TORCH_PCH_DIR", str(tmp_path / "pch"))
    monkeypatch.setenv("KF_TORCH_PCH_REQUESTS", str(tmp_path / "req"))
    extra, note = pch.lookup(["-O3", "-fplugin=/tmp/x.so"])
    assert extra is None and "'-fplugin=/tmp/x.so' is not on the allow-list" in note
    assert not (tmp_path / "req").exists()


def test_build_refuses_a_request_with_a_forbidden_flag_or_a_bad_shape(tmp_path):
    req = tmp_path / "r.json"
    req.write_text(json.dumps({"extra_cflags": ["-O3", "-include/etc/passwd"]}))
    assert pch_build.main([str(req), str(tmp_path / "out")]) == pch_build.REFUSED_EXIT
    assert not (tmp_path / "out" / "key").exists()
    req.write_text(json.dumps({"extra_cflags": "-O3"}))
    assert pch_build.main([str(req), str(tmp_path / "out")]) == pch_build.REFUSED_EXIT
    req.write_text(json.dumps(["-O3"]))
    assert pch_build.main([str(req), str(tmp_path / "out")]) == pch_build.REFUSED_EXIT
