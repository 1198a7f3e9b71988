"""kernelfoundry.eval_pipeline.utils.custom_task_helper: every public function of the reference's module with
its signature and the facts the reference's code relies on (block extraction and replacement, block index,
blocks_to_str, find_path, config lookup, test names), over our C++ core; plus the documented fixes."""

from __future__ import annotations

import shutil

import pytest

from conftest import FIXTURES
from kernelfoundry.eval_pipeline.utils import custom_task_helper as helper
from kernelfoundry.eval_pipeline.utils.custom_task_helper import (allowed_text_file_extensions, blocks_to_str,
                                                                  dict_to_yaml_str, find_path, get_block, get_config,
                                                                  get_test_names, has_build_step,
                                                                  has_reference_build_step, update_block)
from kernelfoundry.eval_pipeline.utils.memory_file_map import MemoryFileMap

TWO = "x = 0\n# [EVOLVE_START]\n\nfirst\n\n# [EVOLVE_END]\nmid\n# [EVOLVE_START]\nsecond\n# [EVOLVE_END]\n"


def test_star_import_and_the_reference_names():
    namespace: dict = {}
    exec("from kernelfoundry.eval_pipeline.utils.custom_task_helper import *", namespace)
    for name in ("allowed_text_file_extensions", "get_test_names", "get_block", "has_build_step",
                 "has_reference_build_step", "get_config", "update_block", "blocks_to_str"):
        assert callable(namespace[name]), name
    assert callable(helper.find_path) and callable(helper.dict_to_yaml_str)


def test_allowed_text_file_extensions_is_the_reference_list():
    assert allowed_text_file_extensions() == [
        ".sycl", ".cu", ".cpp", ".cxx", ".cc", ".c", ".hpp", ".hxx", ".hh", ".h", ".inl", ".py", ".md", ".txt",
        ".cl", ".yml", ".yaml", ".sh", ".ps1", ".json", ".toml", ".ini", ".cfg", ".cmake", ".bat", ".cmd"]


def test_get_block_per_file_lists_with_blank_lines_stripped(tmp_path):
    m = MemoryFileMap()
    m["b/k.cpp"] = TWO.encode()
    m["a.py"] = b"# [EVOLVE_START]\ndef f():\n    pass\n# [EVOLVE_END]\n"
    m["data.bin"] = b"# [EVOLVE_START]\nnot scanned\n# [EVOLVE_END]\n"  # not an allowed extension
    m["r.cu"] = b"// [REFERENCE_START]\nref\n// [REFERENCE_END]\n"
    assert get_block(m, "EVOLVE") == {"a.py": ["def f():\n    pass\n"], "b/k.cpp": ["first\n", "second\n"]}
    assert list(get_block(m, "EVOLVE")) == ["a.py", "b/k.cpp"]  # sorted paths
    assert get_block(m, "REFERENCE") == {"r.cu": ["ref\n"]}
    assert get_block(m, "USER_INSTRUCTIONS") == {}
    # The same from a directory.
    m.to_disk(tmp_path / "pkg")
    assert get_block(tmp_path / "pkg", "EVOLVE") == get_block(m, "EVOLVE")
    assert get_block(str(tmp_path / "pkg"), "REFERENCE") == {"r.cu": ["ref\n"]}


@pytest.mark.parametrize("text, needle", [
    ("# [EVOLVE_START]\n# [EVOLVE_START]\nx\n# [EVOLVE_END]\n", "Nested"),
    ("x\n# [EVOLVE_END]\n", "[EVOLVE_END] found without matching [EVOLVE_START]"),
    ("# [EVOLVE_START]\nnever closed\n", "EVOLVE_START"),  # the reference dropped it silently; an error here
])
def test_get_block_malformed_markers_are_value_errors(text, needle):
    m = MemoryFileMap()
    m["k.cpp"] = text.encode()
    with pytest.raises(ValueError) as e:
        get_block(m, "EVOLVE")
    assert needle in str(e.value)


def test_update_block_by_index_adds_a_newline_and_keeps_the_rest():
    m = MemoryFileMap()
    m["k.cpp"] = TWO.encode()
    update_block(m, "EVOLVE", "k.cpp", "NEW", block_index=1)
    assert m["k.cpp"].decode() == TWO.replace("second\n", "NEW\n")
    update_block(m, key="EVOLVE", path="k.cpp", content="ONE\n")  # block 0; content ends with \n already
    assert get_block(m, "EVOLVE") == {"k.cpp": ["ONE\n", "NEW\n"]}
    assert m["k.cpp"].decode().startswith("x = 0\n# [EVOLVE_START]\nONE\n# [EVOLVE_END]\nmid\n")


def test_update_block_errors_are_the_reference_builtins():
    m = MemoryFileMap()
    m["k.cpp"] = TWO.encode()
    with pytest.raises(AssertionError) as e:
        update_block(m, "EVOLVE", "k.cpp", "x", block_index=2)
    assert "Block index 2 out of range; only 2 'EVOLVE' block(s) in k.cpp" in str(e.value)
    with pytest.raises(AssertionError) as e:
        update_block(m, "REFERENCE", "k.cpp", "x")
    assert "Block with key 'REFERENCE' not found in k.cpp" in str(e.value)
    with pytest.raises(FileNotFoundError):
        update_block(m, "EVOLVE", "missing.cpp", "x")
    m["open.cpp"] = b"// [EVOLVE_START]\nx\n"
    with pytest.raises(ValueError):
        update_block(m, "EVOLVE", "open.cpp", "y")
    assert m["k.cpp"] == TWO.encode()  # nothing changed by the failed updates


def test_update_block_keeps_crlf_and_mode():
    m = MemoryFileMap()
    m["w.cpp"] = b"a\r\n// [EVOLVE_START]\r\nold\r\n// [EVOLVE_END]\r\n"
    m.meta_map["w.cpp"]["mode"] = 0o750
    update_block(m, "EVOLVE", "w.cpp", "n1\nn2")
    assert m["w.cpp"] == b"a\r\n// [EVOLVE_START]\r\nn1\r\nn2\r\n// [EVOLVE_END]\r\n"
    assert m.meta_map["w.cpp"]["mode"] == 0o750


def test_blocks_to_str_one_and_several():
    assert blocks_to_str({"k.cpp": ["only\n"]}) == "only\n"
    assert blocks_to_str({"a.py": ["x\n"], "b.cpp": ["y\n", "z\n"]}) == \
        "### Block: a.py ###\nx\n\n### Block: b.cpp ###\ny\n\n### Block: b.cpp ###\nz\n"
    assert blocks_to_str({}) == ""
    import re
    parts = re.split(r"^### Block: (.+?) ###$", blocks_to_str({"a.py": ["x\n"], "b.cpp": ["y\n"]}), flags=re.MULTILINE)
    assert parts[1::2] == ["a.py", "b.cpp"]


def test_find_path_first_sorted_file_with_the_marker():
    m = MemoryFileMap()
    m["z.cpp"] = b"// [EVOLVE_START]\n// [EVOLVE_END]\n"
    m["b.h"] = b"// [EVOLVE_START]\n// [EVOLVE_END]\n"
    m["a.bin"] = b"[EVOLVE_START]"
    assert find_path(m, "EVOLVE") == "b.h"
    assert find_path(m, "REFERENCE") is None


def test_get_config_from_a_map_and_a_directory(tmp_path):
    m = MemoryFileMap()
    m["config.yaml"] = b"task_name: t\ngpu_arch: cpu\nn: 0x10\nflag: yes\nname: ${task_name}_x\n"
    m["sub/config.yml"] = b"task_name: nested\n"  # only the top level counts (our fix)
    assert get_config(m) == {"task_name": "t", "gpu_arch": "cpu", "n": 16, "flag": True, "name": "t_x"}
    m["other.yml"] = b"a: 1\n"
    assert get_config(m, config_stem="other") == {"a": 1}
    with pytest.raises(FileNotFoundError):
        get_config(m, "none")
    m.to_disk(tmp_path / "pkg")
    assert get_config(tmp_path / "pkg") == get_config(m)
    (tmp_path / "pkg" / "config.yml").write_text("task_name: second\n")
    with pytest.raises(ValueError):
        get_config(tmp_path / "pkg")
    m["config.yml"] = b"x: 1\n"
    with pytest.raises(ValueError):
        get_config(m)
    with pytest.raises(FileNotFoundError):
        get_config(tmp_path / "empty_dir_that_does_not_exist")


def test_has_build_step_flags_default_true():
    m = MemoryFileMap()
    m["config.yaml"] = b"task_name: t\n"
    assert has_build_step(m) is True and has_reference_build_step(m) is True
    m["config.yaml"] = b"task_name: t\nhas_build_step: false\nhas_reference_build_step: false\n"
    assert has_build_step(m) is False and has_reference_build_step(m) is False


def test_dict_to_yaml_str_keeps_order_and_indents():
    text = dict_to_yaml_str({"b": 1, "a": {"x": "true", "y": [1, 2]}})
    import yaml
    assert yaml.safe_load(text) == {"b": 1, "a": {"x": "true", "y": [1, 2]}}  # "true" stays a string
    assert text.index("b:") < text.index("a:")
    indented = dict_to_yaml_str({"k": "v"}, indent=2)
    assert indented.splitlines() == ["  k: v"]


def test_get_test_names_of_a_fixture_task(tmp_path):
    task_dir = tmp_path / "relu_cpu"
    shutil.copytree(FIXTURES / "relu_cpu", task_dir)
    names = get_test_names(task_dir)
    assert set(names) == {"all_tests", "correctness_tests", "profile_tests"}
    assert names["correctness_tests"] and names["profile_tests"]
    assert names["all_tests"] == names["correctness_tests"] + names["profile_tests"]
    assert not set(names["correctness_tests"]) & set(names["profile_tests"])
    assert all("task.py" not in t for t in names["all_tests"])  # ids relative to task.py, as the reference's
