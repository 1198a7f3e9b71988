"""ProcessResult, BuildResult, TestResult and MemoryFileMap against the reference's probes
(fixtures/golden/probes.json) and the seed document's signatures; our fixes B9 (merge return codes) and B10
(results_per_gpu kept by decode) where we differ."""

from __future__ import annotations

import copy
import io
import pickle
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from conftest import golden
from kernelfoundry.eval_pipeline import errors
from kernelfoundry.eval_pipeline.task import BuildResult, ProcessResult, TestResult
from kernelfoundry.eval_pipeline.utils.memory_file_map import MemoryFileMap

PROBES = golden("probes")


def pr_from(d: dict) -> ProcessResult:
    return ProcessResult(**d)


# ---------------------------------------------------------------- ProcessResult
def test_process_result_init_decodes_bytes_and_strips_escapes():
    p = PROBES["process_result"]
    r = ProcessResult(0, b"\xff\x1b[31mred\x1b[0m\n", "ok", "msg")
    assert r.encode() == p["bytes_and_escapes"]
    assert (r.returncode, r.stdout, r.stderr, r.message, r.output_data) == (0, "\ufffdred\n", "ok", "msg", None)
    assert r.combine_output() == p["combine_output"][0]
    assert r.combine_output(include_message=False) == p["combine_output"][1]
    assert ProcessResult(returncode=1, stdout="o", stderr="e").combine_output() == p["combine_output"][2]


def test_process_result_create_from_a_completed_process():
    assert PROBES["process_result"]["create"] == {"returncode": 3, "stdout": "so", "stderr": "se", "message": "m",
                                                  "output_data": {"k": 1}}
    code = "import sys; sys.stdout.write('so'); sys.stderr.write('se'); sys.exit(3)"
    for text in (False, True):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=text)
        r = ProcessResult.create(done, message="m", output_data={"k": 1})
        assert r.encode() == PROBES["process_result"]["create"]
    assert ProcessResult.create(subprocess.run(["true"])).encode()["stdout"] == ""  # not captured: None


def test_process_result_merge_fixes_b9_and_keeps_output_data():
    parts = {"a": ProcessResult(0, "a", "b"), "c": ProcessResult(1, "c", "d", "killed"),
             "e": ProcessResult(-9, "e", "f", "", {"runtimes": {"t": [1.0]}})}
    merged = ProcessResult.merge(parts)
    reference = PROBES["process_result"]["merge"]
    assert (merged.stdout, merged.stderr, merged.message) == (reference["stdout"], reference["stderr"],
                                                              reference["message"])
    assert merged.returncode == 1  # first failure; the reference's max() also gives 1 here
    assert merged.output_data == {"e": {"runtimes": {"t": [1.0]}}}  # the reference drops it
    # B9: a signal-killed part must not be hidden by a passing one (the reference's max() gives 0).
    assert ProcessResult.merge({"ok": ProcessResult(0, "", ""), "killed": ProcessResult(-11, "", "")}).returncode == -11
    assert ProcessResult.merge({}) is PROBES["process_result"]["merge_empty"] is None
    with pytest.raises(TypeError):
        ProcessResult.merge({"a": "not a result"})


def test_process_result_decode_encode_and_errors():
    d = {"returncode": 2, "stdout": "x\x1b[1m", "stderr": "", "message": None, "output_data": {"a": [1, 2.5]}}
    r = ProcessResult.decode(d)
    assert r.encode() == {**d, "stdout": "x"}
    assert PROBES["process_result"]["decode_unknown_key"]["error"]["type"] == "TypeError"
    with pytest.raises(TypeError) as e:
        ProcessResult.decode({**d, "extra": 1})
    assert "extra" in str(e.value) and isinstance(e.value, errors.ParseError)
    r.output_data = {"runtimes": {"t": [3.0]}}
    r.stdout, r.stderr, r.message, r.returncode = "a", "b", "c", -15
    assert r.encode() == {"returncode": -15, "stdout": "a", "stderr": "b", "message": "c",
                          "output_data": {"runtimes": {"t": [3.0]}}}
    assert r == pickle.loads(pickle.dumps(r)) == copy.deepcopy(r)
    assert repr(ProcessResult(0, "o", "e")) == \
        "ProcessResult(returncode=0, stdout='o', stderr='e', message=None, output_data=None)"
    with pytest.raises(TypeError):
        r.output_data = {"bad": object()}


# ---------------------------------------------------------------- BuildResult / TestResult
def test_build_result_fields_decode_and_encode():
    assert BuildResult.decode(None) is PROBES["test_result"]["build_result_decode_none"] is None
    reference = golden("with_blocks")["relu_string_evolve_keep_reference"]["build_result_reference"]
    b = BuildResult.decode(reference)
    assert b.encode() == reference and b.worker_info == {"hostname": "h"} and b.artifacts is None
    assert b.result.message == "Build completed successfully"
    art = MemoryFileMap()
    art["k.so"] = b"\x7fELF"
    b2 = BuildResult(worker_info={"h": 1}, result=ProcessResult(0, "", ""), artifacts=art)
    enc = b2.encode()
    assert list(enc) == ["worker_info", "result", "artifacts"] and enc["artifacts"]["k.so"]["content"] == "f0VMRg=="
    assert BuildResult.decode(enc) == b2
    b2.artifacts["k.so"] = b"new"  # views write through
    assert b2.artifacts["k.so"] == b"new"
    assert BuildResult() == BuildResult(None, None, None)


def test_test_result_merge_and_decode_match_the_reference_except_b10():
    probes = PROBES["test_result"]
    two = probes["merge_two"]
    per_gpu = {arch: TestResult.decode(d) for arch, d in two["results_per_gpu"].items()}
    merged = TestResult.merge(per_gpu)
    ours = merged.encode()
    assert ours["worker_info"] == two["worker_info"]
    assert ours["trace_results"] == two["trace_results"]
    assert ours["results_per_gpu"] == two["results_per_gpu"]
    assert ours["performance_result"]["stdout"] == "pa"
    corr = ours["correctness_result"]
    assert (corr["stdout"], corr["stderr"], corr["message"]) == ("ca\ncb", "\n", "Process timed out after 5 seconds")
    assert two["correctness_result"]["returncode"] == 0 and corr["returncode"] == -15  # B9 fixed
    assert ours["performance_result"]["output_data"] == {"bmg": {"runtimes": {"t": [1.0]}}}  # kept per arch

    single = TestResult.merge({"bmg": per_gpu["bmg"]})
    assert probes["merge_single_is_identity"] and single == per_gpu["bmg"]
    assert TestResult.merge({}).encode() == probes["merge_empty"]

    # B10 fixed: results_per_gpu survives decode (the reference drops it).
    assert probes["decode_of_merged_drops_results_per_gpu"]["results_per_gpu"] is None
    again = TestResult.decode(merged.encode())
    assert again.results_per_gpu is not None and set(again.results_per_gpu) == {"bmg", "lnl"}
    assert again.results_per_gpu["lnl"].correctness_result.returncode == -15
    assert TestResult.decode(None) is probes["decode_none"] is None


def test_test_result_fields_and_views():
    t = TestResult()
    assert t.trace_results == {} and t.results_per_gpu is None and t.worker_info is None
    t.trace_results = {"unitrace.000": ProcessResult(0, "ta", "")}
    view = t.trace_results["unitrace.000"]
    view.stdout = "changed"
    assert t.encode()["trace_results"]["unitrace.000"]["stdout"] == "changed"
    t.results_per_gpu = {"bmg": TestResult(worker_info={"g": 1})}
    t.results_per_gpu["bmg"].worker_info = {"g": 2}
    assert t.encode()["results_per_gpu"]["bmg"]["worker_info"] == {"g": 2}
    t.trace_results = {}
    with pytest.raises(ReferenceError):
        view.stdout
    t.correctness_result = ProcessResult(1, "", "")
    assert t.correctness_result.returncode == 1
    assert pickle.loads(pickle.dumps(t)) == t


# ---------------------------------------------------------------- MemoryFileMap
def test_memory_file_map_probes(tmp_path):
    p = PROBES["memory_file_map"]
    m = MemoryFileMap()
    with pytest.raises(ValueError) as e:
        m.open("x", "a")
    assert str(e.value) == p["open_invalid_mode"]["error"]["message"]
    with pytest.raises(FileNotFoundError) as e:
        m.open("missing.txt", "r")
    assert str(e.value) == p["open_missing_read"]["error"]["message"]
    assert m["missing.txt"] is p["getitem_missing"] is None

    with m.open("t.txt", "w") as f:
        f.write("héllo\nworld")
    assert m["t.txt"] == __import__("base64").b64decode(p["after_text_write"]["bytes_b64"])
    assert m.meta_map["t.txt"]["mode"] == p["after_text_write"]["meta_mode"]
    assert ("t.txt" in m) and (Path("t.txt") in m)
    with m.open("t.txt", "r") as f:
        assert f.read() == "héllo\nworld"
    with m.open(Path("b.bin"), "wb") as f:
        f.write(b"\x00\x01")
    assert m.open("b.bin", "rb").read() == b"\x00\x01"

    m.decode({"x.sh": {"content": "eA==", "mode": 0o755, "mtime": 1.5}})
    m["x.sh"] = b"y"
    assert m.meta_map["x.sh"]["mode"] == p["setitem_keeps_mode"]

    legacy = MemoryFileMap().decode({"legacy.txt": "TA==", "new.txt": {"content": "Tg==", "mode": 448, "mtime": 1.5},
                                     "nometa.txt": {"content": "WA=="}})
    enc = legacy.encode()
    expected = p["decode_formats_then_encode"]
    assert enc["new.txt"] == expected["new.txt"] and enc["nometa.txt"] == expected["nometa.txt"]
    assert enc["legacy.txt"]["mode"] == 420 and isinstance(enc["legacy.txt"]["mtime"], float)
    assert MemoryFileMap().decode(p["encode_entry_without_meta"]).encode() == p["encode_entry_without_meta"]
    with pytest.raises(ValueError):
        MemoryFileMap().decode({"a": {"content": "not base64!"}})


def test_memory_file_map_archives_and_disk(tmp_path):
    p = PROBES["memory_file_map"]
    m = MemoryFileMap()
    m.decode({"x/a.sh": {"content": "MDEyMzQ1Njc4OQ==", "mode": 0o755, "mtime": 1700000000.75},
              "b.txt": {"content": "Yg==", "mode": 0o644, "mtime": 1700000001.25}})
    assert m.list_files() == ["x/a.sh", "b.txt"] and len(m) == 2 and list(m) == ["x/a.sh", "b.txt"]
    tgz = m.to_tarball()
    assert tgz[:2] == b"\x1f\x8b" and p["to_tarball_default_is_gzip"]
    with tarfile.open(fileobj=io.BytesIO(tgz)) as tar:
        members = [{"name": t.name, "mode": oct(t.mode), "mtime": t.mtime, "size": t.size, "type": t.type.decode()}
                   for t in tar.getmembers()]
    assert members == p["to_tarball_members"]
    for mode in ("w", "w:bz2", "w:xz"):
        back = MemoryFileMap.from_tarball(tarball_bytes=m.to_tarball(mode))
        assert {k: {"mode": v["mode"], "mtime": v["mtime"]} for k, v in back.meta_map.items()} == \
            p["tar_bytes_roundtrip"]
    with pytest.raises(ValueError):
        m.to_tarball("w:zst")
    with pytest.raises(AssertionError):  # exactly one argument, as the reference asserts
        MemoryFileMap.from_tarball()

    m.to_disk(tmp_path / "out")
    disk = MemoryFileMap.from_disk(tmp_path / "out")
    assert disk.meta_map == p["to_disk_then_from_disk"]["meta"] and disk == m
    assert MemoryFileMap.from_path(tmp_path / "out", include_extensions=[".SH"]).list_files() == ["x/a.sh"]
    (tmp_path / "pkg.tar.gz").write_bytes(tgz)

    def whole_seconds(files):  # tar keeps whole-second mtimes
        return {k: {**v, "mtime": int(v["mtime"])} for k, v in files.encode().items()}
    assert whole_seconds(MemoryFileMap.from_path(tmp_path / "pkg.tar.gz")) == whole_seconds(m)
    assert MemoryFileMap.from_archive(archive_path=tmp_path / "pkg.tar.gz") == \
        MemoryFileMap.from_tarball(tarball_bytes=tgz)

    zbuf = io.BytesIO()
    with zipfile.ZipFile(zbuf, "w") as z:
        z.writestr("root/d/a.txt", "A")
        z.writestr("root/e.txt", "E")
    z = MemoryFileMap.from_zip(zip_bytes=zbuf.getvalue())
    assert z.list_files() == ["root/d/a.txt", "root/e.txt"]
    assert z.remove_root_dir() is True and z.list_files() == ["d/a.txt", "e.txt"]
    assert MemoryFileMap.from_archive(archive_bytes=zbuf.getvalue()) == MemoryFileMap.from_zip(zip_bytes=zbuf.getvalue())
    with pytest.raises(ValueError):
        MemoryFileMap.from_archive(archive_bytes=b"garbage")

    evil = io.BytesIO()
    with tarfile.open(fileobj=evil, mode="w") as tar:
        info = tarfile.TarInfo("pkg/../../escape.py")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"p"))
    with pytest.raises(errors.UnsafeInputError):
        MemoryFileMap.from_tarball(tarball_bytes=evil.getvalue())


@pytest.mark.parametrize("name", ["empty", "single_root", "two_levels", "common_first_level_only",
                                  "different_depth", "root_mismatch_then_match", "no_common"])
def test_remove_root_dir_probes_where_we_agree(name):
    probe = PROBES["remove_root_dir"][name]
    m = MemoryFileMap()
    for key in probe["input"]:
        m[key] = b""
    assert m.remove_root_dir() is probe["ok"]
    assert m.list_files() == probe["keys_after"] and list(m.meta_map) == probe["meta_keys_after"]


def test_remove_root_dir_fixes_b1_b2():
    m = MemoryFileMap()
    m["a/x/c"] = b""
    m["a/y/c"] = b""
    assert m.remove_root_dir() is True and m.list_files() == ["x/c", "y/c"]  # the reference raises (B1)
    single = MemoryFileMap()
    single["dir/only.txt"] = b"1"
    assert single.remove_root_dir() is True and single.list_files() == ["only.txt"]  # the reference drops it (B2)
    assert single._check_valid_file(".gitignore") and not single._check_valid_file("__pycache__/x.pyc")
