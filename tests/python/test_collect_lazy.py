"""Collection with deferred heavy imports (kernelfoundry.lazy_imports, used by ``python -m
kernelfoundry.collect``): the same test lists as a plain collection on every fixture and example task and on
task files that do use torch/numpy at import time; torch is not loaded when task.py only imports it; a
package's code runs once, into the module object everyone holds; errors are reported."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO, collect_json, copy_fixture, run_py, write_task


def collect(task: Path, cwd: Path, eager: bool) -> dict:
    r = run_py(["-m", "kernelfoundry.collect", task], cwd=cwd, **({"KF_COLLECT_EAGER": "1"} if eager else {}))
    data = collect_json(r.stdout)
    data["returncode"] = r.returncode
    return data


def lists(data: dict) -> tuple:
    return ([t["nodeid"] for t in data["tests"] if not t["performance"]],
            [t["nodeid"] for t in data["tests"] if t["performance"]])


PYTEST_EXAMPLES = sorted(p.name for p in (REPO / "examples" / "tasks").iterdir() if (p / "task.py").is_file())
FIXTURE_TASKS = sorted(p.name for p in FIXTURES.iterdir() if (p / "task.py").is_file())


@pytest.mark.parametrize("name", FIXTURE_TASKS + [f"example:{n}" for n in PYTEST_EXAMPLES])
def test_deferred_collection_equals_plain_collection(name, tmp_path):
    if name.startswith("example:"):
        import shutil
        task = tmp_path / name[8:]
        shutil.copytree(REPO / "examples" / "tasks" / name[8:], task)
    else:
        task = copy_fixture(name, tmp_path)
    lazy, eager = collect(task, tmp_path, eager=False), collect(task, tmp_path, eager=True)
    assert lists(lazy) == lists(eager)
    assert lazy["errors"] == eager["errors"] == []
    assert lazy["returncode"] == eager["returncode"] == 0
    assert eager["deferred_imports"] == []


def test_torch_is_not_loaded_for_a_task_that_uses_it_only_in_tests(tmp_path):
    task = copy_fixture("relu_cpu", tmp_path)  # `import torch`, torch.Tensor annotations, torch in test bodies
    data = collect(task, tmp_path, eager=False)
    assert "torch" in data["deferred_imports"]
    assert len(data["tests"]) == 5


MODULE_LEVEL_USES = '''
    import numpy as np
    import pytest
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torch import Tensor
    from kernelfoundry import TestBase

    SIZES = [int(s) for s in np.arange(3)]
    DTYPES = [torch.float32, torch.float64]


    class Model(nn.Module):
        def forward(self, x: Tensor) -> Tensor:
            return F.relu(x)


    def helper(x: torch.Tensor) -> torch.Tensor:
        return x


    class TestUses(TestBase):
        @pytest.mark.parametrize("dtype", DTYPES)
        @pytest.mark.parametrize("n", SIZES)
        def test_a(self, n, dtype):
            assert n >= 0

        @pytest.mark.skipif(torch.cuda.is_available() and False, reason="never")
        def test_b(self):
            assert nn.Module is torch.nn.Module

        @pytest.mark.parametrize("t", [torch.zeros(1), "x"], ids=["zeros", "text"])
        def test_c(self, t):
            pass

        @pytest.mark.performance
        def test_bench(self):
            pass
'''


def test_module_level_uses_load_the_package_and_give_the_same_lists(tmp_path):
    task = write_task(tmp_path / "uses", textwrap.dedent(MODULE_LEVEL_USES))
    lazy, eager = collect(task, tmp_path, eager=False), collect(task, tmp_path, eager=True)
    assert lazy["errors"] == [] and lazy["returncode"] == 0, lazy
    assert lists(lazy) == lists(eager)
    assert len(lazy["tests"]) == 6 + 1 + 2 + 1
    assert "torch" not in lazy["deferred_imports"] and "numpy" not in lazy["deferred_imports"]


def test_package_code_runs_once_into_the_shared_module(tmp_path):
    script = textwrap.dedent('''
        import json, sys
        from kernelfoundry import lazy_imports
        lazy_imports.install()
        import torch
        import numpy
        first = torch
        deferred_before = lazy_imports.is_deferred(torch)
        import torch.nn as nn          # a submodule: loads the package first, no second execution
        from torch.nn import functional
        import numpy.linalg
        print(json.dumps({
            "deferred_before": deferred_before,
            "same_object": first is sys.modules["torch"] and nn is sys.modules["torch.nn"] and torch.nn is nn,
            "spec_loader_real": type(torch.__spec__.loader).__name__,
            "nn_spec_name": nn.__spec__.name,
            "works": bool(float(torch.ones(2).sum()) == 2.0 and numpy.linalg.norm([3, 4]) == 5.0),
            "loaded": [lazy_imports.loaded("torch"), lazy_imports.loaded("numpy")],
        }))
    ''')
    r = run_py(["-c", script], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out == {"deferred_before": True, "same_object": True, "spec_loader_real": "SourceFileLoader",
                   "nn_spec_name": "torch.nn", "works": True, "loaded": [True, True]}


def test_a_submodule_import_runs_each_module_once(tmp_path):
    pkg = tmp_path / "heavypkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("import builtins\nbuiltins.KF_RUNS.append('init')\nfrom . import sub\n"
                                     "VALUE = 42\n")
    (pkg / "sub" / "__init__.py").write_text("import builtins\nbuiltins.KF_RUNS.append('sub')\n")
    (pkg / "other.py").write_text("import builtins\nbuiltins.KF_RUNS.append('other')\n")
    script = textwrap.dedent('''
        import builtins, json, sys
        builtins.KF_RUNS = []
        sys.path.insert(0, sys.argv[1])
        from kernelfoundry import lazy_imports
        lazy_imports.install(["heavypkg"])
        import heavypkg
        runs_after_import = list(builtins.KF_RUNS)
        import heavypkg.sub as sub      # made by the package's own __init__
        import heavypkg.other as other  # not made by it: a normal import
        print(json.dumps({"after_import": runs_after_import, "runs": builtins.KF_RUNS,
                          "same": sub is sys.modules["heavypkg.sub"] is heavypkg.sub,
                          "sub_spec": [sub.__spec__.name, type(sub.__spec__.loader).__name__],
                          "value": heavypkg.VALUE, "other": other.__name__}))
    ''')
    r = run_py(["-c", script, tmp_path], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out == {"after_import": [], "runs": ["init", "sub", "other"], "same": True,
                   "sub_spec": ["heavypkg.sub", "SourceFileLoader"], "value": 42, "other": "heavypkg.other"}


def test_an_import_error_in_task_py_is_reported(tmp_path):
    task = write_task(tmp_path / "broken", "import torch\nimport no_such_module_kf\n")
    lazy, eager = collect(task, tmp_path, eager=False), collect(task, tmp_path, eager=True)
    assert lazy["tests"] == eager["tests"] == []
    assert len(lazy["errors"]) == 1 and "no_such_module_kf" in lazy["errors"][0]
    assert len(eager["errors"]) == 1 and "no_such_module_kf" in eager["errors"][0]
