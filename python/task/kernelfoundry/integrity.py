"""What the reference calls, as it was before candidate code ran: a check for paired timing, where the candidate
and the reference share one test process (kernelfoundry.paired).

Why. In one process a candidate can slow the side it is compared with instead of being fast: a bias_relu
candidate that set ``torch.relu`` to a function computing relu three times scored 3.5x where its kernel scores
2.3x, ``correct`` (found 2026-12-05). Correctness runs keep the candidate out of the test process
(kernelfoundry.isolation); timed runs pair it with the reference call by call in one process, for the precision
of the speedup, and this module is their guard.

What is watched (``take``, at the end of collection: the task module is imported, candidate code normally is not
— it loads in fixtures):

* every function, class and module bound in the namespaces a reference reaches: torch, torch.nn.functional,
  torch.nn, torch.linalg, torch.fft, torch.special, torch.Tensor (its class dict), numpy, numpy.linalg, math,
  operator, builtins, kernelfoundry's own modules, and the test modules (their callables only: a module-level
  cache set by a fixture is not a replacement). A name bound to another object later is a replacement;
  names added later are not watched.
* torch's dispatcher: the kernels registered for every aten operator (``torch._C._dispatch_dump``), so a C++
  extension that registers its own kernel over an aten one (``TORCH_LIBRARY_IMPL(aten, CPU, m)``) is seen.

``problem(full)`` is None or the first change, for a ``suspicious`` verdict; ``full`` also compares the
dispatcher (~25 ms; the cheap part is a few thousand identity checks). Not covered: native code that rewrites
the reference's machine code or the memory of objects in place: a process shared with candidate code can never be
fully guarded (README, "Candidate isolation").
"""

from __future__ import annotations

import sys
import types
from typing import Any, Optional

#: Namespaces watched by their dotted name (those not imported when the snapshot is taken are skipped).
WATCHED = ("torch", "torch.nn.functional", "torch.nn", "torch.linalg", "torch.fft", "torch.special", "torch.Tensor",
           "torch._C._VariableFunctions", "numpy", "numpy.linalg", "math", "operator", "builtins")

_SNAPSHOT: list = [None]


def _resolve(dotted: str) -> Any:
    head, _, rest = dotted.partition(".")
    obj = sys.modules.get(head)
    for part in rest.split(".") if rest else []:
        obj = getattr(obj, part, None) if obj is not None else None
    return obj


def _bound(namespace: Any) -> dict:
    """The functions, classes and modules bound in `namespace` (a module or a class), by name."""
    try:
        items = vars(namespace).items()
    except TypeError:
        return {}
    return {name: value for name, value in list(items)
            if isinstance(value, (types.ModuleType, type)) or callable(value)}


def _dispatcher() -> Optional[dict]:
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    c = torch._C  # noqa: SLF001 — the dispatcher's introspection
    try:
        names = sorted({s.name for s in c._jit_get_all_schemas() if s.name.startswith("aten::")})  # noqa: SLF001
        return {n: c._dispatch_dump(n) for n in names}  # noqa: SLF001
    except (AttributeError, RuntimeError):
        return None


def _describe(value: Any) -> str:
    name = getattr(value, "__qualname__", None) or type(value).__name__
    module = getattr(value, "__module__", None) or ""
    return f"{module}.{name}" if module else str(name)


def take(test_modules: list) -> None:
    """Records what is watched now (see the module comment). `test_modules` are the collected test modules."""
    spaces = {}
    for dotted in WATCHED:
        obj = _resolve(dotted)
        if obj is not None:
            spaces[dotted] = (obj, _bound(obj))
    for name, module in list(sys.modules.items()):
        if name.startswith("kernelfoundry") and module is not None:
            spaces[name] = (module, _bound(module))
    for module in test_modules:
        if module is not None:
            spaces[module.__name__] = (module, _bound(module))
    _SNAPSHOT[0] = {"spaces": spaces, "dispatcher": _dispatcher()}


def problem(full: bool = False) -> Optional[str]:
    """None, or what was replaced since ``take`` ("torch.relu was replaced by task.slow_relu"); `full` also compares
    the dispatcher's kernels. None when nothing was taken."""
    snap = _SNAPSHOT[0]
    if snap is None:
        return None
    for dotted, (obj, bound) in snap["spaces"].items():
        try:
            now = vars(obj)
        except TypeError:
            continue
        for name, value in bound.items():
            current = now.get(name, _MISSING)
            if current is not value:
                what = "removed" if current is _MISSING else f"replaced by {_describe(current)}"
                return (f"{dotted}.{name} was {what} after the test module was collected: the reference's "
                        "surroundings were changed while the pair was timed (a candidate must not patch what the "
                        "reference calls)")
    if full and snap["dispatcher"] is not None:
        now = _dispatcher() or {}
        for name, dump in snap["dispatcher"].items():
            if now.get(name, dump) != dump:
                return (f"torch's dispatcher has another kernel for {name} than before the candidate was loaded: "
                        "a kernel registered over an aten operator changes what the reference runs")
    return None


_MISSING = object()
