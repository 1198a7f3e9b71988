"""kernelfoundry.testing in the low-signal mode of `kf validate --run` (KF_FAKE_OUTPUT): the checkers ignore
``actual`` and check a trivial output instead, failing (KF-LOW-SIGNAL) exactly when that output passes."""

import numpy as np
import pytest
import torch

from kernelfoundry.testing import assert_allclose, cosine_similarity


@pytest.mark.parametrize("mode", ["zeros", "constant"])
def test_loose_tolerance_on_tiny_outputs_is_low_signal(monkeypatch, mode):
    monkeypatch.setenv("KF_FAKE_OUTPUT", mode)
    expected = torch.full((16, 4096), 2.4e-4)  # softmax-sized outputs, KernelBench's fixed atol 1e-2
    with pytest.raises(AssertionError, match=r"^KF-LOW-SIGNAL\[.*test_loose_tolerance_on_tiny_outputs_is_low_signal"):
        assert_allclose(torch.ones(1), expected, epsilon=1.0, rtol=1e-2, ratio_below_max_err=1 - 1e-12)


def test_strict_check_returns_and_ignores_actual(monkeypatch):
    monkeypatch.setenv("KF_FAKE_OUTPUT", "zeros")
    expected = np.random.default_rng(0).random(1000).astype(np.float32) + 0.5
    assert_allclose("not even an array", expected)  # zeros fail the default check: good signal, no error
    assert cosine_similarity(None, expected) == 1.0


def test_constant_output_caught_where_zeros_are_not(monkeypatch):
    # outputs that are all (nearly) the same value: zeros fail, a constant equal to the mean passes
    expected = np.full(100, 3.0) + np.linspace(0, 1e-4, 100)
    monkeypatch.setenv("KF_FAKE_OUTPUT", "zeros")
    assert_allclose(None, expected)
    monkeypatch.setenv("KF_FAKE_OUTPUT", "constant")
    with pytest.raises(AssertionError, match="all-constant output"):
        assert_allclose(None, expected)


def test_without_the_mode_actual_is_checked(monkeypatch):
    monkeypatch.delenv("KF_FAKE_OUTPUT", raising=False)
    with pytest.raises(AssertionError, match="Tensors not close"):
        assert_allclose(np.zeros(10), np.ones(10))
    monkeypatch.setenv("KF_FAKE_OUTPUT", "something-else")  # unknown modes are ignored
    with pytest.raises(AssertionError, match="Tensors not close"):
        assert_allclose(np.zeros(10), np.ones(10))
