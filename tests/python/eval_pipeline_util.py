"""Shared helpers of the kernelfoundry.eval_pipeline tests: fixture copies with the golden modes and mtime,
golden lookups and encode comparisons."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from conftest import FIXTURES, golden

#: mtime of every fixture file when the goldens were made (fixtures/README.md).
FIXTURE_MTIME = 1704067200.0


def copy_fixture_like_golden(name: str, dest_parent: Path) -> Path:
    """A copy of shared/fixtures/tasks/<name> with the modes (0644, edge_text/build.sh 0755) and mtime the
    goldens were made from, so that encode() can be compared with them byte for byte."""
    dest = dest_parent / name
    shutil.copytree(FIXTURES / name, dest)
    for root, dirs, files in os.walk(dest):
        os.chmod(root, 0o755)
        for n in files:
            p = Path(root) / n
            p.chmod(0o755 if n == "build.sh" else 0o644)
            os.utime(p, (FIXTURE_MTIME, FIXTURE_MTIME))
    return dest


def files_by_path(task_data: dict, drop_mtime: bool = False) -> dict:
    """task_data entries keyed by path (directory order differs between machines), optionally without mtime."""
    out = {}
    for path, entry in task_data.items():
        e = dict(entry)
        if drop_mtime:
            e.pop("mtime", None)
        out[path] = e
    return out


def assert_encode_equal(ours: dict, reference: dict, drop_mtime: bool = False) -> None:
    """Same keys in the same order; task_data compared by path; everything else exactly."""
    assert list(ours) == list(reference)
    assert files_by_path(ours["task_data"], drop_mtime) == files_by_path(reference["task_data"], drop_mtime)
    for key in reference:
        if key != "task_data":
            assert ours[key] == reference[key], key
    # key order inside config and blocks is part of the wire format
    assert list(ours["config"]) == list(reference["config"])
    assert list(ours["blocks"]) == list(reference["blocks"])


def with_blocks_case(name: str) -> dict:
    return golden("with_blocks")[name]
