"""Structured test discovery (reference spec §1.8, done without scraping pytest's text output).

As a pytest plugin:

    python -m pytest -p kernelfoundry.collect --collect-only -q task.py

or as a runner (runs pytest in-process with the same plugin, rootdir = the task directory):

    python -m kernelfoundry.collect <task_dir>

Either prints exactly one line to stdout that starts with ``KF_COLLECT_JSON:`` followed by
``{"tests": [{"nodeid": "TestX::test_a[512]", "performance": true|false}, ...], "errors": ["...", ...],
"exitstatus": <int>}``. Node ids are the reference's form: the text after ``task.py::``. A test is a
performance test iff it carries ``@pytest.mark.performance`` (on the function, class or module).
``errors`` holds pytest's own text for every collector that failed (e.g. task.py does not import).

The runner defers the import of heavy packages (torch, numpy, …) until collection actually uses them
(kernelfoundry.lazy_imports): a task.py that only imports torch at the top is collected without loading
torch. The payload's ``deferred_imports`` lists the packages that were imported but never needed.
``KF_COLLECT_EAGER=1`` turns this off (kf re-collects that way when a deferred collection reports errors, so
error texts are always those of a normal import).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Optional

import pytest

from . import lazy_imports

__all__ = ["MARKER", "CollectPlugin", "relative_nodeid", "main"]

MARKER = "KF_COLLECT_JSON:"


def relative_nodeid(nodeid: str) -> str:
    """The text after the first ``task.py::`` (what the reference extracts), else the node id unchanged."""
    token = "task.py::"
    i = nodeid.find(token)
    return nodeid[i + len(token):] if i >= 0 else nodeid


class CollectPlugin:
    """Records collected items and collection errors; prints the JSON line at session end."""

    def __init__(self) -> None:
        self.tests: list[dict] = []
        self.errors: list[str] = []
        self.emitted = False

    def pytest_collectreport(self, report) -> None:
        if report.failed:
            text = report.longreprtext or "collection failed"
            self.errors.append(f"ERROR collecting {report.nodeid or '<session>'}\n{text}")

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session, config, items) -> None:
        # Runs before -m/-k deselection, so every test is listed with its performance flag.
        self.tests = [{"nodeid": relative_nodeid(item.nodeid),
                       "performance": item.get_closest_marker("performance") is not None} for item in items]

    def emit(self, exitstatus: int) -> None:
        if self.emitted:
            return
        self.emitted = True
        deferred = sorted(name for name, module in list(sys.modules.items())
                          if "." not in name and lazy_imports.is_deferred(module))
        payload = {"tests": self.tests, "errors": self.errors, "exitstatus": int(exitstatus),
                   "deferred_imports": deferred}
        sys.stdout.write("\n" + MARKER + json.dumps(payload, ensure_ascii=False) + "\n")
        sys.stdout.flush()

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus) -> None:
        self.emit(exitstatus)


_plugin = CollectPlugin()


# Module-level hooks so that ``-p kernelfoundry.collect`` works (pytest registers the module itself).
def pytest_collectreport(report) -> None:
    _plugin.pytest_collectreport(report)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items) -> None:
    _plugin.pytest_collection_modifyitems(session, config, items)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus) -> None:
    _plugin.pytest_sessionfinish(session, exitstatus)


def main(argv: Optional[list[str]] = None) -> int:
    """``python -m kernelfoundry.collect <task_dir> [extra pytest args]``; exits with pytest's status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        sys.stderr.write("usage: python -m kernelfoundry.collect <task_dir> [pytest args...]\n")
        return 4
    task_dir = Path(args[0]).resolve()
    lazy = os.environ.get("KF_COLLECT_EAGER", "") != "1"
    if lazy:
        lazy_imports.install(task_dir=task_dir)
    plugin = CollectPlugin()
    os.chdir(task_dir)  # as the pipeline runs tasks: relative file access works during collection
    # --assert=plain: nothing is asserted while collecting, and pytest's rewriting importer would otherwise
    # take task.py away from the TaskSourceFinder.
    extra = ["--assert=plain"] if lazy else []
    status = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", f"--rootdir={task_dir}", *extra,
                          str(task_dir / "task.py"), *args[1:]], plugins=[plugin])
    if not plugin.emitted:  # pytest stopped before the session (e.g. conftest.py failed to import)
        plugin.errors.append(f"pytest exited with status {int(status)} before collecting; see stderr")
        plugin.emit(int(status))
    return int(status)


if __name__ == "__main__":
    sys.exit(main())
