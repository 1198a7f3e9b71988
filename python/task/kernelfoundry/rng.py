"""The process-global random number generators — torch's CPU default generator, numpy's global RandomState and
Python's ``random`` — as one JSON-safe state, so that candidate code run in an executor (kernelfoundry.isolation)
draws the numbers it would draw in the test process, and the test process draws after it what it would draw after
an in-process call.

Why. The usual KernelBench check seeds the global generator and builds both models, ``torch.manual_seed(42);
ref = Model(*init); torch.manual_seed(42); new = ModelNew(*init)``, so that their weights are equal. With
``ModelNew`` built in an executor of its own the seed was the checker's and the weights the executor's: an honest
candidate was value_mismatch (found 2026-12-06). kernelfoundry.executor sends the checker's state before a
request when it changed since the executor last had it, and the executor returns its state with a reply when the
request changed it; the two processes then share one sequence of draws, as one process would.

Not carried: CUDA generators (isolation is for CPU runs), explicit ``torch.Generator`` objects (they live where
they were made; one made by the checker is not passed to the executor).
"""

from __future__ import annotations

import base64
import importlib
import sys
from typing import Any, Optional

#: The generators carried, by the module that holds them.
MODULES = ("torch", "numpy", "random")


def capture(modules: tuple = MODULES) -> dict:
    """The state of each global generator of `modules` that this process has imported (a JSON-safe dict)."""
    state: dict = {}
    torch = sys.modules.get("torch") if "torch" in modules else None
    if torch is not None and hasattr(torch, "get_rng_state"):
        state["torch"] = base64.b64encode(bytes(torch.get_rng_state().numpy())).decode()
    np = sys.modules.get("numpy") if "numpy" in modules else None
    if np is not None and hasattr(np, "random"):
        name, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
        state["numpy"] = [name, base64.b64encode(keys.tobytes()).decode(), int(pos), int(has_gauss), float(cached)]
    rand = sys.modules.get("random") if "random" in modules else None
    if rand is not None:
        version, internal, gauss = rand.getstate()
        state["random"] = [version, list(internal), gauss]
    return state


def restore(state: Optional[dict]) -> None:
    """Sets the global generators to `state` (a ``capture`` of another process), importing a generator's module
    when this process has not (candidate code imports it next). Raises ValueError on a malformed state."""
    if not isinstance(state, dict):
        return
    try:
        if "torch" in state:
            torch: Any = importlib.import_module("torch")
            raw = bytearray(base64.b64decode(state["torch"]))
            torch.set_rng_state(torch.frombuffer(raw, dtype=torch.uint8))
        if "numpy" in state:
            np: Any = importlib.import_module("numpy")
            name, keys, pos, has_gauss, cached = state["numpy"]
            np.random.set_state((name, np.frombuffer(base64.b64decode(keys), dtype=np.uint32).copy(), pos,
                                 has_gauss, cached))
        if "random" in state:
            import random  # noqa: PLC0415

            version, internal, gauss = state["random"]
            random.setstate((version, tuple(internal), gauss))
    except (TypeError, ValueError, KeyError, RuntimeError) as e:
        raise ValueError(f"malformed random generator state: {e}") from None
