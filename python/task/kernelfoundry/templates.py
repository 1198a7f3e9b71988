"""Template and runtime parameters, handled as data (reference spec §4.4.1, §4.5; bug B21).

The reference detected template parameters with a regex, sent them to pytest as the ``str()`` of a tuple and
read them back with ``eval``; variant keys were later split on ``_`` so values came back as strings. Here
values are parsed with ``json.loads`` or ``ast.literal_eval`` (literals only, never code), so
``(16, -2, 'a_b', True)`` round-trips exactly.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from typing import Any, Optional, Sequence

__all__ = [
    "find_template_parameters",
    "format_template_params",
    "parse_template_params",
    "parse_runtime_params",
    "get_runtime_params_from_argv",
]

_TEMPLATE_RE = re.compile(r"forward_templated<([^>]*)>")


def _parse_piece(piece: str) -> Any:
    """One comma-separated template argument: int/float when it parses as a number, else bool/str."""
    try:
        value = float(piece)
    except ValueError:
        text = piece.strip()
        if text == "true":
            return True
        if text == "false":
            return False
        return text
    if "." in piece or value != value or value in (float("inf"), float("-inf")):
        return value
    return int(value)


def find_template_parameters(code: str) -> Optional[list[tuple]]:
    """Every ``forward_templated<a, b, …>`` argument list in ``code`` as a tuple, in order (duplicates
    kept), or None when ``code`` does not contain ``forward_templated`` at all (spec §4.4.1).

    Each argument becomes an int ("16", "1e3"), a float ("1.0"), a bool ("true"/"false") or the stripped
    text. Like the reference, ``<…>`` stops at the first ``>`` (no nesting)."""
    if "forward_templated" not in code:
        return None
    return [tuple(_parse_piece(p) for p in m.group(1).split(",")) for m in _TEMPLATE_RE.finditer(code)]


def format_template_params(params: Sequence[Any]) -> str:
    """The ``--template_params`` value for ``params``: a JSON list (parsed back by parse_template_params)."""
    return json.dumps(list(params))


def _literal(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as e:
        raise ValueError(f"{what}: expected a JSON value or a Python literal, got {text!r} ({e})") from None


def parse_template_params(text: Optional[str]) -> Optional[tuple]:
    """Parses a ``--template_params`` value: a JSON list (``[16, 32]``) or a Python tuple literal
    (``(16, 32)``, the reference's form). A scalar becomes a 1-tuple; None/empty gives None.
    Raises ValueError for anything that is not a literal (no code is ever evaluated)."""
    if text is None or text.strip() == "":
        return None
    value = _literal(text.strip(), "--template_params")
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return (value,)


def parse_runtime_params(text: Optional[str]) -> dict:
    """Parses a ``--runtime_params`` value (a JSON object; a Python dict literal is accepted too).
    None/empty gives {}. Raises ValueError when the value is not a mapping."""
    if text is None or text.strip() == "":
        return {}
    value = _literal(text.strip(), "--runtime_params")
    if not isinstance(value, dict):
        raise ValueError(f"--runtime_params: expected a JSON object, got {type(value).__name__}")
    return value


def get_runtime_params_from_argv(argv: Optional[Sequence[str]] = None) -> dict:
    """Reads ``--runtime_params=<json>`` (or ``--runtime_params <json>``) straight from ``sys.argv``, for use
    at collection time (e.g. to parametrise tests). Returns {} when absent; the last occurrence wins."""
    argv = list(sys.argv if argv is None else argv)
    found: Optional[str] = None
    for i, arg in enumerate(argv):
        if arg.startswith("--runtime_params="):
            found = arg.split("=", 1)[1]
        elif arg == "--runtime_params" and i + 1 < len(argv):
            found = argv[i + 1]
    return parse_runtime_params(found)
