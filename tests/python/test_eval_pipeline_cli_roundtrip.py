"""The JSON wire format between Python and the `kf` CLI, both ways: `kf encode` output decodes in Python and
re-encodes identically; a Python encode() (of a created task and of a with_blocks candidate) is read by
`kf encode/decode/hash/blocks` with the same files, hash id and blocks."""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import KF_BIN
from eval_pipeline_util import copy_fixture_like_golden
from kernelfoundry.eval_pipeline.task import Task
from kernelfoundry.eval_pipeline.utils.memory_file_map import MemoryFileMap


def kf(*args, timeout: float = 300) -> subprocess.CompletedProcess:
    if not KF_BIN.exists():
        pytest.fail(f"kf is not built at {KF_BIN} (set KF_BIN or build the `kf` target)")
    return subprocess.run([str(KF_BIN), *map(str, args)], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("name", ["relu_cpu", "multi_block", "edge_text"])
def test_kf_encode_decodes_in_python_and_matches_task_create(name, tmp_path):
    pkg = copy_fixture_like_golden(name, tmp_path)
    out = tmp_path / "kf.json"
    r = kf("encode", pkg, "-o", out)
    assert r.returncode == 0, r.stderr
    from_kf = json.loads(out.read_text())
    task = Task.decode(from_kf)
    assert task.encode() == from_kf
    created, _ = Task.create(pkg)
    assert created.encode() == from_kf  # same files, same order, same tests, blocks and config
    assert json.dumps(created.encode()) == json.dumps(from_kf)  # key order too


@pytest.mark.parametrize("name", ["relu_cpu", "multi_block"])
def test_python_encode_is_read_by_kf(name, tmp_path):
    task, _ = Task.create(copy_fixture_like_golden(name, tmp_path))
    if name == "relu_cpu":
        cand = task.with_blocks({"EVOLVE": "torch::Tensor relu_forward(torch::Tensor x) { return x.relu(); }\n"})
    else:
        cand = task.with_blocks({"EVOLVE": {"kernel_c.py": ["def stage_c1(x):\n    return x + 1\n"]}})
    for t in (task, cand):
        encoded = t.encode()
        src = tmp_path / "py.json"
        src.write_text(json.dumps(encoded))

        r = kf("encode", src)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout) == encoded

        r = kf("hash", src)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == t.hash_id()

        r = kf("blocks", src, "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout) == t.blocks

        out_dir = tmp_path / f"decoded_{id(t)}"
        r = kf("decode", src, "-o", out_dir)
        assert r.returncode == 0, r.stderr
        assert MemoryFileMap.from_disk(out_dir) == t.task_data  # bytes, modes and mtimes

        archive = tmp_path / f"decoded_{id(t)}.tar.gz"
        r = kf("decode", src, "-o", archive)
        assert r.returncode == 0, r.stderr
        again, _ = Task.create(archive.read_bytes())
        assert again.hash_id() == t.hash_id() and again.blocks == t.blocks
        assert again.correctness_tests == t.correctness_tests and again.profile_tests == t.profile_tests


def test_kf_rejects_what_python_rejects(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"task_data": {}, "correctness_tests": [], "profile_tests": [], "config": {},
                               "blocks": {}}))
    r = kf("encode", bad)
    assert r.returncode == 3 and "has_build_step" in r.stderr
    with pytest.raises(KeyError, match="has_build_step"):
        Task.decode(json.loads(bad.read_text()))
