"""Template/runtime parameters as data (B21) and the correctness helpers of kernelfoundry.testing."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import golden
from kernelfoundry.templates import (find_template_parameters, format_template_params, get_runtime_params_from_argv,
                                     parse_runtime_params, parse_template_params)
from kernelfoundry.testing import all_close_with_slack, assert_allclose, cosine_similarity


@pytest.mark.parametrize("case", golden("probes")["template_parameters"], ids=lambda c: c["input"])
def test_find_template_parameters_matches_golden(case):
    got = find_template_parameters(case["input"])
    expected = case["output"]["ok"]
    assert (None if got is None else [list(t) for t in got]) == expected
    if got:  # types too: 16 is an int, 1.0 a float, true a bool
        assert [[type(v) for v in t] for t in got] == [[type(v) for v in t] for t in expected]


@pytest.mark.parametrize("params", [(16, 32), (-2, 1000), (1.5, True, False, "a_b"), ("x",), ()])
def test_template_params_round_trip_as_data_B21(params):
    assert parse_template_params(format_template_params(params)) == params
    assert parse_template_params(repr(params)) == params  # the reference's str(tuple) form


def test_template_params_are_never_evaluated_B21(tmp_path):
    marker = tmp_path / "pwned"
    with pytest.raises(ValueError):
        parse_template_params(f"__import__('pathlib').Path({str(marker)!r}).touch()")
    assert not marker.exists()
    assert parse_template_params("8") == (8,)
    assert parse_template_params("") is None and parse_template_params(None) is None


def test_runtime_params():
    assert parse_runtime_params('{"n": 4, "mode": "fast"}') == {"n": 4, "mode": "fast"}
    assert parse_runtime_params(None) == {}
    with pytest.raises(ValueError):
        parse_runtime_params("[1, 2]")
    assert get_runtime_params_from_argv(["pytest", '--runtime_params={"a": 1}', "task.py"]) == {"a": 1}
    assert get_runtime_params_from_argv(["pytest", "--runtime_params", '{"b": 2}']) == {"b": 2}
    assert get_runtime_params_from_argv(["pytest"]) == {}


def test_assert_allclose_ratio_rule():
    e = np.linspace(1, 2, 1000)
    a = e.copy()
    a[:10] *= 1.5  # 1 % off: exactly 99 % close, which is not "more than 99 %"
    with pytest.raises(AssertionError, match="10 of 1000 elements"):
        assert_allclose(a, e)
    a[0] = e[0]  # 0.9 % off -> passes
    assert_allclose(a, e)
    assert_allclose(a, e, ratio_below_max_err=0.5)
    with pytest.raises(AssertionError):
        assert_allclose(a, e, ratio_below_max_err=0.995)


def test_assert_allclose_torch_and_special_values():
    x = torch.tensor([0.0, 1e-9, float("inf"), float("nan"), -3.0], dtype=torch.float32)
    assert_allclose(x, x.clone())
    assert_allclose(x.to(torch.bfloat16), x.to(torch.bfloat16))
    assert_allclose(torch.tensor([1.0, 2.0]), np.array([1.001, 2.0]), check_dtype=False)
    with pytest.raises(AssertionError, match="shape mismatch"):
        assert_allclose(torch.zeros(3), torch.zeros(4))
    with pytest.raises(AssertionError, match="relative error"):
        assert_allclose(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 3.0]))
    assert_allclose(np.zeros(0), np.zeros(0))


def test_all_close_with_slack_and_cosine():
    assert all_close_with_slack(torch.ones(100), torch.ones(100) * 1.001)
    assert not all_close_with_slack(torch.ones(100), torch.ones(100) * 1.5)
    assert not all_close_with_slack(torch.ones(3), torch.ones(4))
    assert cosine_similarity(np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 3.0])) == pytest.approx(1.0)
    assert cosine_similarity(np.zeros(3), np.zeros(3)) == 1.0
    # Below min_sim is False, as the reference documents (it used to raise here; docs/reference-compat.md).
    assert cosine_similarity(np.array([1.0, 0.0]), np.array([0.0, 1.0])) is False


# ---- issue 10 fault 3: non-finite outputs never pass; the message names the FIRST bad index and counts ----

def test_assert_allclose_nan_in_under_one_percent_fails_naming_first_index_and_counts():
    e = np.linspace(1, 2, 1000)
    a = e.copy()
    a[[3, 500, 997]] = np.nan  # 9 NaN in 1,000 (0.9 %): the ratio rule alone would pass this
    a[[10, 20, 30, 40, 50, 60]] = np.nan
    with pytest.raises(AssertionError) as info:
        assert_allclose(a, e)
    msg = str(info.value)
    assert "9 NaN and 0 Inf where the reference is finite, 0 with a relative error" in msg
    assert "First bad element at index (3,)" in msg
    assert "non-finite values fail whatever ratio_below_max_err allows" in msg
    assert not all_close_with_slack(a, e)
    with pytest.raises(AssertionError, match="9 NaN and 0 Inf"):
        cosine_similarity(a, e)


def test_assert_allclose_half_percent_nan_in_a_mebi_tensor_fails():
    n = 1 << 20
    e = torch.rand(n, generator=torch.Generator().manual_seed(0)) + 0.5
    a = e.clone()
    idx = torch.randperm(n, generator=torch.Generator().manual_seed(1))[: n // 200]  # 0.5 %
    a[idx] = float("nan")
    first = int(idx.min())
    with pytest.raises(AssertionError) as info:
        assert_allclose(a, e)
    assert f"{n // 200} NaN and 0 Inf" in str(info.value)
    assert f"index ({first},)" in str(info.value)


def test_assert_allclose_inf_and_out_of_tolerance_are_counted_separately():
    e = torch.ones(2, 500)
    a = e.clone()
    a[1, 7] = float("inf")
    a[0, 9] = float("-inf")
    a[1, 2] = 5.0  # out of tolerance, finite
    with pytest.raises(AssertionError) as info:
        assert_allclose(a, e, ratio_below_max_err=0.5)
    msg = str(info.value)
    assert "0 NaN and 2 Inf where the reference is finite, 1 with a relative error" in msg
    assert "First bad element at index (0, 9)" in msg


def test_special_values_in_the_reference_still_match_themselves():
    e = torch.tensor([float("nan"), float("inf"), -float("inf"), 1.0])
    assert_allclose(e.clone(), e)
    assert all_close_with_slack(e.clone(), e)


# ---- issue 10 fault 4: dtypes are compared (a task may allow a different one explicitly) ----

def test_float64_result_for_float32_reference_fails_naming_both_dtypes():
    e = torch.randn(64, 100, dtype=torch.float32)
    with pytest.raises(AssertionError, match="dtype mismatch: actual float64 vs expected float32"):
        assert_allclose(e.to(torch.float64), e)
    assert_allclose(e.to(torch.float64), e, check_dtype=False)
    assert not all_close_with_slack(e.to(torch.float64), e)
    assert all_close_with_slack(e.to(torch.float64), e, check_dtype=False)
    with pytest.raises(AssertionError, match="dtype mismatch: actual bfloat16 vs expected float32"):
        cosine_similarity(e.to(torch.bfloat16), e)
    # numpy and torch with the same element type agree; lists and scalars carry no dtype.
    assert_allclose(e.numpy(), e)
    assert_allclose([1.0, 2.0], torch.tensor([1.0, 2.0]))
