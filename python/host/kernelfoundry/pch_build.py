"""The precompiled-header builder (host side; never on a candidate's path): ``python -m kernelfoundry.pch_build
REQUEST OUT``, run by kf (src/pipeline/torch_pch.cc) in a sandboxed child that may write only OUT, for a request a
build child wrote (kernelfoundry.pch, the task side's half, describes the protocol and the trust split).

It recomputes the key from the request (the file name is not trusted) with the task side's :func:`key`, accepts
only flags on the task side's allow-list (:func:`allowed_flag`), and compiles the header with exactly the flags
torch's own build of the extension uses (torch's ``_write_ninja_file_to_build_library``, the extension name left
out: torch's headers do not use it). OUT then holds the header, its ``.gch`` and a ``key`` file (written last).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from .pch import HEADER, allowed_flag, key

__all__ = ["build", "main", "REFUSED_EXIT"]

_HEADER_TEXT = "// kf: torch's extension API, precompiled once per compiler, torch and flags\n" \
               "#pragma once\n#include <torch/extension.h>\n"
#: Exit code of ``python -m kernelfoundry.pch_build`` for a request it refuses (a flag not allowed, a bad shape).
REFUSED_EXIT = 3


def _torch_compile_line(extra_cflags: list[str], scratch: Path) -> tuple[str, list[str]]:
    """(compiler, flags) of torch's own compile of a CPU source with ``extra_cflags``, read from the build.ninja
    torch writes; the extension-name macro is left out."""
    from torch.utils import cpp_extension  # noqa: PLC0415 — only the trusted PCH build imports torch

    ninja = scratch / "build.ninja"
    cpp_extension._write_ninja_file_to_build_library(  # noqa: SLF001 — the one place torch composes its flags
        path=str(ninja), name="kf_pch", sources=[str(scratch / "kf_pch.cpp")], extra_cflags=list(extra_cflags),
        extra_cuda_cflags=[], extra_ldflags=[], extra_include_paths=[], with_cuda=False, is_standalone=False)
    values = {}
    for line in ninja.read_text().splitlines():
        name, sep, value = line.partition(" = ")
        if sep and name in ("cxx", "cflags", "post_cflags"):
            values[name] = value
    if "cxx" not in values or "cflags" not in values:
        raise RuntimeError("torch's build.ninja has no cxx/cflags line")
    flags = shlex.split(values["cflags"]) + shlex.split(values.get("post_cflags", ""))
    return values["cxx"], [f for f in flags if not f.startswith("-DTORCH_EXTENSION_NAME=")]


def build(request_path: Path, out: Path) -> str:
    """Builds the PCH a request asks for into ``out`` (header, ``.gch``, ``key``; ``key`` written last).
    Returns the key. Raises ValueError for a request it refuses, RuntimeError when the compile fails."""
    doc = json.loads(request_path.read_text())
    flags = doc.get("extra_cflags") if isinstance(doc, dict) else None
    if not isinstance(flags, list) or len(flags) > 64 or not all(isinstance(f, str) for f in flags):
        raise ValueError(f"{request_path}: expected {{\"extra_cflags\": [up to 64 strings]}}")
    for f in flags:
        if not allowed_flag(f):
            raise ValueError(f"{request_path}: flag {f!r} is not on the precompiled-header allow-list")
    k = key(flags)
    if k is None:
        raise RuntimeError("compiler or torch not found")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out) as scratch:
        cxx, cflags = _torch_compile_line(flags, Path(scratch))
    header = out / HEADER
    header.write_text(_HEADER_TEXT)
    cmd = [cxx, *cflags, "-x", "c++-header", str(header), "-o", str(header) + ".gch"]
    print("$ " + shlex.join(cmd), flush=True)
    done = subprocess.run(cmd, stdin=subprocess.DEVNULL, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the precompiled header did not compile (exit {done.returncode})")
    (out / "key").write_text(k)
    return k


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m kernelfoundry.pch_build REQUEST.json OUT_DIR", file=sys.stderr)
        return 2
    try:
        k = build(Path(argv[0]), Path(argv[1]))
    except ValueError as e:
        print(f"kernelfoundry.pch_build: refused: {e}", file=sys.stderr)
        return REFUSED_EXIT
    except (OSError, RuntimeError) as e:
        print(f"kernelfoundry.pch_build: {e}", file=sys.stderr)
        return 1
    print(f"kernelfoundry.pch_build: built {k}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
