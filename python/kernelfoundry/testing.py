"""Correctness helpers for task tests (reference spec §4.5, ``kernelfoundry.testing``).

All helpers accept numpy arrays, torch tensors (any device/dtype, including bfloat16), Python scalars and
nested lists. Values are compared in float64 on the CPU.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

__all__ = ["assert_allclose", "all_close_with_slack", "cosine_similarity", "to_numpy"]


def to_numpy(value: Any) -> np.ndarray:
    """``value`` as a float64 (or complex128) numpy array; torch tensors are detached and moved to the CPU."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        t = value.detach()
        if t.is_complex():
            t = t.to(torch.complex128)
        else:
            t = t.to(torch.float64)
        return t.cpu().numpy()
    arr = np.asarray(value)
    if np.iscomplexobj(arr):
        return arr.astype(np.complex128)
    return arr.astype(np.float64)


def _match(actual: Any, expected: Any, epsilon: float, rtol: float):
    a = to_numpy(actual)
    e = to_numpy(expected)
    if a.shape != e.shape:
        raise AssertionError(f"shape mismatch: actual {a.shape} vs expected {e.shape}")
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        rel = np.abs(a - e) / (np.abs(e) + epsilon)
        # Equal values (infinities included) and NaN in both places count as matching.
        ok = (rel < rtol) | (a == e) | (np.isnan(a) & np.isnan(e))
    return a, e, rel, ok


def all_close_with_slack(actual: Any, expected: Any, epsilon: float = 1e-7, rtol: float = 0.01,
                         ratio_below_max_err: float = 0.99) -> bool:
    """True when more than ``ratio_below_max_err`` of the elements have ``|a-e| / (|e| + epsilon) < rtol``
    (an empty pair of equal shape is close). False on a shape mismatch."""
    try:
        _, _, _, ok = _match(actual, expected, epsilon, rtol)
    except AssertionError:
        return False
    return ok.size == 0 or float(ok.mean()) > ratio_below_max_err


def assert_allclose(actual: Any, expected: Any, epsilon: float = 1e-7, rtol: float = 0.01,
                    ratio_below_max_err: float = 0.99) -> None:
    """Passes when more than ``ratio_below_max_err`` (default 99 %) of the elements have
    ``|a-e| / (|e| + epsilon) < rtol``; equal values and NaN-vs-NaN match. Otherwise raises AssertionError
    with the mismatch statistics (count, ratio, worst element). Shapes must be equal."""
    a, e, rel, ok = _match(actual, expected, epsilon, rtol)
    if ok.size == 0:
        return
    ratio = float(ok.mean())
    if ratio > ratio_below_max_err:
        return
    bad = ~ok
    rel_bad = np.where(bad, np.nan_to_num(rel, nan=np.inf), -np.inf)
    worst = np.unravel_index(int(np.argmax(rel_bad)), rel.shape) if rel.ndim else ()
    raise AssertionError(
        f"Tensors not close: {int(bad.sum())} of {ok.size} elements ({100.0 * (1 - ratio):.3f} %) have a relative "
        f"error >= rtol={rtol} (epsilon={epsilon}); at most {100.0 * (1 - ratio_below_max_err):.3f} % allowed. "
        f"Worst at index {tuple(int(i) for i in worst)}: actual {a[worst]!r}, expected {e[worst]!r}, "
        f"relative error {float(rel[worst]):.6g}")


def cosine_similarity(actual: Any, expected: Any, min_sim: float = 0.99985) -> float:
    """Cosine similarity of the flattened values; raises AssertionError when it is below ``min_sim``.
    Two all-zero inputs count as identical (1.0). Returns the similarity."""
    a = to_numpy(actual).ravel()
    e = to_numpy(expected).ravel()
    if a.shape != e.shape:
        raise AssertionError(f"size mismatch: actual {a.size} vs expected {e.size} elements")
    na = float(np.linalg.norm(a))
    ne = float(np.linalg.norm(e))
    if na == 0.0 and ne == 0.0:
        sim = 1.0
    elif na == 0.0 or ne == 0.0:
        sim = 0.0
    else:
        sim = float(np.real(np.vdot(e, a))) / (na * ne)
    if not sim >= min_sim:
        raise AssertionError(f"cosine similarity {sim:.8f} is below the minimum {min_sim}")
    return sim
