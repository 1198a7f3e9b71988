"""evaluate(verdict_cache=True): the Python API reaches the verdict cache through the record module as `kf run`
does — a repeated identical evaluation returns the stored verdict (Evaluation.cached), also when recorded
(db=URL: a new job holding it) — while a verdict that is not a property of the candidate (a test timeout) is
evaluated again every time; the default (verdict_cache=False) never uses the cache."""

from __future__ import annotations

import pytest

from conftest import REPO
from kernelfoundry.eval_pipeline import evaluate, open_store
from kernelfoundry.eval_pipeline.task import Task

EXAMPLE = REPO / "examples" / "tasks" / "omp_reduction"
CANDIDATES = REPO / "examples" / "candidates" / "omp_reduction"
HANG = "double kf_sum_squares(const float* x, std::size_t n) {\n  volatile bool forever = true;\n" \
       "  while (forever) {}\n  return x[0] * n;\n}\n"


@pytest.fixture()
def private_cache(tmp_path, monkeypatch):
    """A verdict cache of this test's own: an earlier run elsewhere must not be the first hit."""
    monkeypatch.setenv("KF_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_repeated_identical_evaluation_is_a_cache_hit(private_cache, tmp_path):
    task, _ = Task.create(EXAMPLE)
    wrong = (CANDIDATES / "wrong.cpp").read_text()
    first = evaluate(task, wrong, verdict_cache=True)
    assert first.status in ("value_mismatch", "tests_failed") and first.cached is None
    assert len(first.logs) > 0  # it ran
    second = evaluate(task, wrong, verdict_cache=True)
    assert second.cached is not None and len(second.cached["key"]) == 64
    assert second.status == first.status and second.status_detail == first.status_detail
    assert second.logs == []  # nothing was built or tested
    # Recorded: a new job whose kernels row holds the stored verdict.
    db = tmp_path / "kernels.sqlite3"
    recorded = evaluate(task, wrong, verdict_cache=True, db=str(db))
    assert recorded.cached is not None and recorded.job_id is not None
    rows = open_store(str(db)).kernels(last=1)
    assert rows[0]["kf_status"] == first.status
    # The default does not use the cache.
    assert evaluate(task, wrong).cached is None


def test_a_timeout_is_never_cached(private_cache):
    task, _ = Task.create(EXAMPLE)
    overrides = {"test_timeout": 2, "test_output_inactivity_timeout": 2}
    for _ in range(2):
        ev = evaluate(task, HANG, overrides=overrides, verdict_cache=True)
        assert ev.status == "test_timeout", ev.eval_log
        assert ev.cached is None
