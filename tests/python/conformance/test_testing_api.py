"""Conformance: kernelfoundry.testing as the reference documents it (docs/api/public.rst "Assertions"): argument
names, order, defaults and return types of assert_allclose, all_close_with_slack and cosine_similarity, the
msg / err_stats forms, and where kf is deliberately stricter (docs/reference-compat.md)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

from compat_util import REQUIRED, params
from kernelfoundry.testing import all_close_with_slack, assert_allclose, cosine_similarity


def test_signatures():
    sig = inspect.signature(assert_allclose)
    assert params(assert_allclose)[:7] == [("actual", REQUIRED), ("expected", REQUIRED), ("epsilon", 1e-7),
                                           ("rtol", 0.01), ("ratio_below_max_err", 0.99), ("msg", None),
                                           ("err_stats", True)]
    assert all(sig.parameters[n].kind is inspect.Parameter.KEYWORD_ONLY
               for n in ("epsilon", "rtol", "ratio_below_max_err", "msg", "err_stats", "check_dtype"))
    assert params(all_close_with_slack)[:5] == [("output_reference", REQUIRED), ("output_kernel", REQUIRED),
                                                ("epsilon", 1e-7), ("max_rel_err", 0.01),
                                                ("ratio_below_max_err", 0.99)]
    assert params(cosine_similarity)[:3] == [("output_reference", REQUIRED), ("output_kernel", REQUIRED),
                                             ("min_sim", 0.99985)]
    for fn in (all_close_with_slack, cosine_similarity):  # ours after them, keyword-only
        assert inspect.signature(fn).parameters["check_dtype"].kind is inspect.Parameter.KEYWORD_ONLY


def test_assert_allclose_passes_above_the_ratio_and_returns_none():
    e = torch.linspace(1, 2, 1000)
    a = e.clone()
    a[:9] *= 1.5  # 0.9 % out of tolerance
    assert assert_allclose(a, e) is None
    with pytest.raises(TypeError):
        assert_allclose(a, e, 1e-7)  # the tolerances are keyword-only, as in the reference


def test_assert_allclose_message_forms():
    a, e = np.zeros(10), np.ones(10)
    with pytest.raises(AssertionError) as info:
        assert_allclose(a, e)
    text = str(info.value)
    assert "not equal within tolerance" in text
    assert "Mismatched elements: 10 / 10 (100.0%)" in text
    assert "Greatest absolute difference: 1.000000000000000e+00" in text
    assert "Greatest relative difference: 9.999999000000099e-01" in text  # 1 / (1 + epsilon)
    with pytest.raises(AssertionError) as info:
        assert_allclose(a, e, err_stats=False)
    assert "not equal within tolerance" in str(info.value) and "Mismatched" not in str(info.value)
    with pytest.raises(AssertionError) as info:
        assert_allclose(a, e, msg="kernel output for n=10")
    assert str(info.value).startswith("kernel output for n=10\n") and "Mismatched elements" in str(info.value)
    with pytest.raises(AssertionError) as info:
        assert_allclose(a, e, msg=lambda standard: f"[custom] {len(standard) > 0}")
    assert str(info.value) == "[custom] True"


def test_assert_allclose_tolerance_knobs():
    e = np.full(100, 10.0)
    a = e * 1.05
    with pytest.raises(AssertionError):
        assert_allclose(a, e)
    assert_allclose(a, e, rtol=0.06)
    a[:30] = e[:30]  # 70 % off
    assert_allclose(a, e, rtol=0.01, ratio_below_max_err=0.2)
    assert_allclose(np.zeros(4), np.full(4, 1e-9), epsilon=1.0)  # |a - e| / (|e| + epsilon)


def test_all_close_with_slack_returns_bools_against_the_reference():
    ref = torch.full((1000,), 2.0)
    ker = ref * 1.005
    result = all_close_with_slack(ref, ker)
    assert result is True
    assert all_close_with_slack(ref, ref * 1.5) is False
    assert all_close_with_slack(ref, ref * 1.5, max_rel_err=0.6) is True
    bad = ref.clone()
    bad[:20] = 100.0  # 2 % wrong
    assert all_close_with_slack(ref, bad) is False
    assert all_close_with_slack(ref, bad, ratio_below_max_err=0.97) is True
    # The relative error is taken against output_reference: |k - r| / (|r| + eps).
    r, k = torch.tensor([100.0]), torch.tensor([101.5])
    assert all_close_with_slack(r, k, max_rel_err=0.016) is True  # 1.5 / 100
    assert all_close_with_slack(k, r, max_rel_err=0.0147) is False  # 1.5 / 101.5 = 0.01478
    assert all_close_with_slack(np.ones(5), np.ones(5)) is True  # numpy works too


def test_cosine_similarity_returns_bools():
    x = torch.randn(4096, generator=torch.Generator().manual_seed(0))
    assert cosine_similarity(x, x * 3.0) is True  # scale does not matter
    assert cosine_similarity(x, -x) is False
    noisy = x + 0.05 * torch.randn(4096, generator=torch.Generator().manual_seed(1))
    assert cosine_similarity(x, noisy) is False  # ~0.9988 < 0.99985
    assert cosine_similarity(x, noisy, min_sim=0.99) is True
    assert cosine_similarity(x.reshape(64, 64), x.reshape(4096)) is True  # flattened
    # The reference's kernelbench idiom: `assert cosine_similarity(out_ref, out) or cosine_similarity(...)`.
    assert cosine_similarity(x, -x) or cosine_similarity(x, x)


# ---- where kf is stricter (docs/reference-compat.md) ----

def test_nan_in_under_one_percent_fails_everywhere():
    ref = torch.ones(1000)
    ker = ref.clone()
    ker[:5] = float("nan")  # 0.5 %: the ratio rule alone would accept it
    with pytest.raises(AssertionError, match="5 NaN and 0 Inf where the reference is finite"):
        assert_allclose(ker, ref)
    assert all_close_with_slack(ref, ker) is False
    assert all_close_with_slack(ker, ref) is False  # either order
    with pytest.raises(AssertionError, match="5 NaN and 0 Inf where the other output is finite"):
        cosine_similarity(ref, ker)


def test_dtypes_are_compared_unless_allowed():
    e = torch.randn(32)
    with pytest.raises(AssertionError, match="dtype mismatch"):
        assert_allclose(e.double(), e)
    assert_allclose(e.double(), e, check_dtype=False)
    assert all_close_with_slack(e, e.double()) is False
    assert all_close_with_slack(e, e.double(), check_dtype=False) is True
    with pytest.raises(AssertionError, match="dtype mismatch"):
        cosine_similarity(e, e.double())
    assert cosine_similarity(e, e.double(), check_dtype=False) is True


def test_shapes_must_match():
    with pytest.raises(AssertionError, match="shape mismatch"):
        assert_allclose(np.ones((2, 3)), np.ones(3))  # the reference broadcast these
    assert all_close_with_slack(np.ones(3), np.ones((2, 3))) is False
    with pytest.raises(AssertionError, match="size mismatch"):
        cosine_similarity(np.ones(3), np.ones(4))
