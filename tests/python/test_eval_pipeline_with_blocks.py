"""Task.with_blocks against fixtures/golden/with_blocks.json (the reference on relu_cpu, multi_block and
edge_text), its documented behaviours (results dropped unless keep_test_result_reference, {'EVOLVE': None},
the shorthand dict for a single block) and our fixes (B11 {path: [None]}, B12 no shared state, CRLF kept)."""

from __future__ import annotations

import base64

import pytest

from conftest import golden
from eval_pipeline_util import FIXTURE_MTIME, assert_encode_equal, with_blocks_case
from kernelfoundry.eval_pipeline import errors
from kernelfoundry.eval_pipeline.task import BuildResult, ProcessResult, Task, TestResult

COLUMNS = {"EVOLVE": "evolve_block", "REFERENCE": "reference_block", "USER_INSTRUCTIONS": "user_instructions_block"}

OK_CASES = [
    ("relu_string_evolve", "relu_cpu"),
    ("relu_string_evolve_keep_reference", "relu_cpu"),
    ("relu_string_user_instructions", "relu_cpu"),
    ("multi_block_dict", "multi_block"),
    ("multi_block_dict_partial_first_only", "multi_block"),
    ("none_top_level", "relu_cpu"),
    ("none_top_level_keep_reference", "relu_cpu"),
    ("none_per_path", "multi_block"),
    ("edge_text_crlf_string", "edge_text"),
    ("empty_string_content", "relu_cpu"),
]


def parent_task(fixture: str, case: dict | None = None) -> Task:
    """The fixture's golden encoding, with the reference results the golden's keep cases carried over."""
    task = Task.decode(golden(fixture)["encode"])
    if case is not None and case["keep_test_result_reference"]:
        task.build_result_reference = BuildResult.decode(case["build_result_reference"])
        task.test_result_reference = TestResult.decode(case["test_result_reference"])
    return task


@pytest.mark.parametrize("name,fixture", OK_CASES)
def test_with_blocks_matches_golden(name, fixture):
    case = with_blocks_case(name)
    assert case["result"] == "ok"
    parent = parent_task(fixture, case)
    before = parent.encode()
    new = parent.with_blocks(case["blocks_arg"], case["keep_test_result_reference"])
    ours = new.encode()

    if name == "edge_text_crlf_string":
        # Our fix: the rewritten file keeps its CRLF line endings (the reference writes LF); the golden's
        # LF bytes are what we get after normalising.
        ours_bytes = base64.b64decode(ours["task_data"]["kernel.cpp"]["content"])
        assert b"\r\n" in ours_bytes
        reference_bytes = base64.b64decode(golden("with_blocks")["edge_text_crlf_string_bytes_b64"])
        assert ours_bytes.replace(b"\r\n", b"\n") == reference_bytes
        reference_like = dict(ours)
        reference_like["task_data"] = dict(ours["task_data"])
        reference_like["task_data"]["kernel.cpp"] = dict(case["encode"]["task_data"]["kernel.cpp"])
        ours = reference_like
    assert_encode_equal(ours, case["encode"], drop_mtime=True)
    for path, entry in case["encode"]["task_data"].items():
        if path in case["rewritten_files_text"]:
            assert ours["task_data"][path]["mtime"] > FIXTURE_MTIME  # rewritten now, like the reference
        else:
            assert ours["task_data"][path]["mtime"] == entry["mtime"], path
    assert new.blocks == case["blocks"]
    row = new.to_database_task() if new.config.get("task_origin") else None
    if row is not None:
        for key, text in case["blocks_to_str"].items():
            assert getattr(row, COLUMNS[key]) == text
    assert new.extract_code_result.encode() == case["extract_code_result"]
    for path, text in case["rewritten_files_text"].items():
        data = new.task_data[path]
        assert (data.replace(b"\r\n", b"\n") if name == "edge_text_crlf_string" else data) == text.encode()
        assert new.task_data.meta_map[path]["mode"] == case["rewritten_files_modes"][path]
        assert parent.task_data[path] != new.task_data[path]
    assert sorted(new.task_data.list_files()) == sorted(case["task_data_files"])
    assert (new.test_result_reference.encode() if new.test_result_reference else None) == case["test_result_reference"]
    assert (new.build_result_reference.encode() if new.build_result_reference else None) == case["build_result_reference"]
    assert parent.encode() == before, "with_blocks modified its receiver"


def test_identity_update_keeps_every_byte():
    parent = parent_task("relu_cpu")
    evolve = parent.blocks["EVOLVE"]["relu_kernel.cpp"][0]
    new = parent.with_blocks({"EVOLVE": evolve})
    for path, same in golden("with_blocks")["identity_update_bytes_equal"].items():
        assert (new.task_data[path] == parent.task_data[path]) is same


def test_errors_are_the_reference_types():
    relu, multi = parent_task("relu_cpu"), parent_task("multi_block")

    case = with_blocks_case("relu_missing_key")
    assert case["result"]["type"] == "KeyError"
    with pytest.raises(KeyError) as e:
        relu.with_blocks(case["blocks_arg"])
    assert isinstance(e.value, errors.NotFoundError) and "NOT_A_KEY" in str(e.value)

    case = with_blocks_case("multi_block_string_rejected")
    with pytest.raises(ValueError) as e:
        multi.with_blocks(case["blocks_arg"])
    assert case["result"]["message"] in str(e.value)

    case = with_blocks_case("multi_block_too_many_contents")
    assert case["result"]["type"] == "AssertionError"
    with pytest.raises(AssertionError) as e:
        multi.with_blocks(case["blocks_arg"])
    assert case["result"]["message"] in str(e.value)

    # The reference creates bad_blocks_unclosed and fails here; its encoding decodes, and we fail the same way.
    case = with_blocks_case("unclosed_string")
    with pytest.raises(ValueError) as e:
        Task.decode(golden("bad_blocks_unclosed")["encode"]).with_blocks(case["blocks_arg"])
    assert case["result"]["message"] in str(e.value)

    with pytest.raises(KeyError):  # a file that does not exist
        multi.with_blocks({"EVOLVE": {"no_such.py": ["x\n"]}})
    with pytest.raises(ValueError, match="mixes the shorthand"):
        multi.with_blocks({"EVOLVE": "x", "REFERENCE": {"task.py": ["y"]}})
    with pytest.raises(TypeError):
        multi.with_blocks({"EVOLVE": {"kernel_a.py": [b"bytes are not text"]}})


def test_none_inside_a_list_is_the_none_path():
    """B11 fixed: the reference crashes later with AttributeError; we give the documented None result."""
    case = with_blocks_case("multi_block_list_with_none")
    assert case["result"]["type"] == "AttributeError"
    parent = parent_task("multi_block")
    new = parent.with_blocks(case["blocks_arg"])
    assert new.extract_code_result.encode() == with_blocks_case("none_per_path")["extract_code_result"]
    assert len(new.task_data) == 0 and new.blocks == parent.blocks


def test_results_are_dropped_unless_keep_test_result_reference():
    parent = parent_task("relu_cpu")
    pr = ProcessResult(0, "out", "")
    parent.build_result = BuildResult(worker_info={"host": "c"}, result=pr)
    parent.build_result_reference = BuildResult(worker_info={"host": "r"}, result=pr)
    parent.test_result = TestResult(correctness_result=pr)
    parent.test_result_reference = TestResult(correctness_result=pr, worker_info={"host": "r"})
    code = "torch::Tensor relu_forward(torch::Tensor x) { return x.clamp_min(0); }\n"

    dropped = parent.with_blocks({"EVOLVE": code})
    assert dropped.build_result is None and dropped.test_result is None
    assert dropped.build_result_reference is None and dropped.test_result_reference is None

    kept = parent.with_blocks({"EVOLVE": code}, keep_test_result_reference=True)
    assert kept.build_result is None and kept.test_result is None
    assert kept.build_result_reference == parent.build_result_reference
    assert kept.test_result_reference == parent.test_result_reference
    assert kept.blocks["EVOLVE"] == {"relu_kernel.cpp": [code]}

    failed = parent.with_blocks({"EVOLVE": None}, keep_test_result_reference=True)
    assert failed.extract_code_result.returncode == 1 and len(failed.task_data) == 0
    assert failed.test_result_reference == parent.test_result_reference and failed.test_result is None


def test_shorthand_and_full_forms_agree():
    parent = parent_task("relu_cpu")
    code = "torch::Tensor relu_forward(torch::Tensor x) { return x; }\n"
    short = parent.with_blocks({"EVOLVE": code})
    full = parent.with_blocks({"EVOLVE": {"relu_kernel.cpp": [code]}})
    assert short.task_data["relu_kernel.cpp"] == full.task_data["relu_kernel.cpp"]
    assert short.blocks == full.blocks
    per_path_none = parent.with_blocks({"EVOLVE": {"relu_kernel.cpp": None}})
    assert per_path_none.extract_code_result.message == "One or more blocks to update were None"


def test_children_never_share_state_with_the_parent():
    """B12 fixed: two candidates from one parent are independent of each other and of the parent."""
    parent = parent_task("multi_block")
    a = parent.with_blocks({"EVOLVE": {"kernel_a.py": ["def stage_a(x):\n    return x * 3.0\n"]}})
    b = parent.with_blocks({"EVOLVE": {"kernel_a.py": ["def stage_a(x):\n    return x * 4.0\n"]}})
    a.task_data["kernel_a.py"] = b"changed"
    assert b"4.0" in b.task_data["kernel_a.py"] and b"2.0" in parent.task_data["kernel_a.py"]
