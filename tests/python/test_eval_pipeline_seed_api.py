"""Every class, field, method and parameter of the seed API document (shared/seed/) exists in
kernelfoundry.eval_pipeline.task with the same parameter names, order and defaults, and in the type stubs."""

from __future__ import annotations

import ast
import re

import pytest

from conftest import PYTHON_DIR, SHARED
from kernelfoundry.eval_pipeline import task as task_module

SEED = next((SHARED / "seed").glob("*.txt"))
STUB = PYTHON_DIR / "kernelfoundry" / "eval_pipeline" / "task.pyi"


def split_params(text: str) -> list:
    """'a: int, b: dict[str, X] = <factory>' -> [('a', None), ('b', '<factory>')] (brackets respected)."""
    params, depth, cur = [], 0, ""
    for ch in text + ",":
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            if cur.strip():
                name = cur.split(":")[0].split("=")[0].strip()
                default = cur.split("=", 1)[1].strip() if "=" in cur else None
                params.append((name, default))
            cur = ""
        else:
            cur += ch
    return params


def seed_api() -> dict:
    """{class: {"fields": {name: default}, "methods": {name: [(param, default)]}}} from the seed text."""
    api, cls = {}, None
    for line in SEED.read_text().splitlines():
        m = re.match(r"class kernelfoundry\.eval_pipeline\.task\.(\w+)\(", line)
        if m:
            cls = api.setdefault(m.group(1), {"fields": {}, "methods": {}})
            continue
        if cls is None:
            continue
        m = re.match(r"(?:classmethod )?(\w+)\((.*)\)(?: →.*)?(?:\[source\])?¶", line)
        if m:
            cls["methods"][m.group(1)] = split_params(m.group(2))
            continue
        m = re.match(r"(\w+): ([^=¶]+?)(?: = (.+))?¶$", line)
        if m:
            cls["fields"][m.group(1)] = m.group(3)
    return api


def runtime_params(fn) -> list:
    """Parameter names and defaults from a pybind11 signature line (self dropped)."""
    first = fn.__doc__.splitlines()[0]
    inner = first[first.index("(") + 1:first.rindex(") ->")]
    return [(n, d) for n, d in split_params(inner) if n != "self"]


API = seed_api()


def test_the_seed_was_parsed():
    assert set(API) == {"ProcessResult", "BuildResult", "TestResult", "Task"}
    assert len(API["Task"]["fields"]) == 14 and "with_blocks" in API["Task"]["methods"]


@pytest.mark.parametrize("cls_name", sorted(API))
def test_fields_exist_with_the_seed_defaults(cls_name):
    cls = getattr(task_module, cls_name)
    init = dict(runtime_params(cls.__init__))
    for field, default in API[cls_name]["fields"].items():
        assert isinstance(getattr(cls, field, None), property), f"{cls_name}.{field}"
        if default is None and field not in init:
            continue
        assert field in init, f"{cls_name}.__init__ lacks {field}"
        expected = "None" if default in ("<factory>", None) and init[field] is not None else default
        assert init[field] == expected, f"{cls_name}.{field}: default {init[field]} != seed {default}"


@pytest.mark.parametrize("cls_name", sorted(API))
def test_methods_have_the_seed_parameters(cls_name):
    cls = getattr(task_module, cls_name)
    for method, params in API[cls_name]["methods"].items():
        fn = getattr(cls, method, None)
        assert fn is not None, f"{cls_name}.{method}"
        ours = runtime_params(fn)
        names = [n for n, _ in params]
        assert [n for n, _ in ours] == names, f"{cls_name}.{method}: {ours} vs seed {params}"
        for (name, seed_default), (_, our_default) in zip(params, ours):
            if seed_default == "<factory>":
                assert our_default == "None", f"{cls_name}.{method}({name})"
            else:
                assert our_default == seed_default, f"{cls_name}.{method}({name}): {our_default} != {seed_default}"


def test_the_stub_declares_every_seed_member():
    tree = ast.parse(STUB.read_text())
    stub = {node.name: {n.target.id if isinstance(n, ast.AnnAssign) else n.name
                        for n in node.body if isinstance(n, (ast.AnnAssign, ast.FunctionDef))}
            for node in tree.body if isinstance(node, ast.ClassDef)}
    for cls_name, members in API.items():
        for name in list(members["fields"]) + list(members["methods"]):
            assert name in stub[cls_name], f"task.pyi: {cls_name}.{name}"
