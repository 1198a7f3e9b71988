"""A precompiled header of ``torch/extension.h`` for torch-extension builds (issue "Throughput", item 3).

Most of a torch-extension compile is GCC parsing torch's headers. GCC can load them from a precompiled header
(PCH) instead: ``-include <dir>/kf_torch_extension.h`` makes it look for ``kf_torch_extension.h.gch`` beside the
header first, and a PCH that does not fit the compile (other flags, another compiler) is ignored — with a
warning, ``-Winvalid-pch`` — and the headers are parsed as before. A PCH can make a build faster, never wrong.

Trust. A build child runs candidate code (the extension is imported to check that it loads), so it never writes
a PCH that other builds use. The work is split:

* the build child (:func:`kernelfoundry.compiler.compile_torch_extension`) computes the key of its compile
  (:func:`key`: the compiler binary, torch, Python and the extra flags) and looks for
  ``$KF_TORCH_PCH_DIR/<key>/``. When it is there the compile gets ``-include``; when it is not, the child writes
  a request (``<key>.json``: the extra flags) into ``$KF_TORCH_PCH_REQUESTS`` and compiles without;
* kf, on the trusted side, after the build runs ``python -m kernelfoundry.pch REQUEST OUT`` in a sandboxed child
  that may write only OUT. This module recomputes the key from the request (the file name is not trusted),
  accepts only flags from an allow-list (optimisation, language standard, macros, code-generation ``-f``/``-m``
  options and warnings; never ``-I``, ``-include``, ``-fplugin``, ``-specs``, ``-B``, ``-Wp,``/``-Wa,``/``-Wl,``
  or ``@file``), and compiles the header with exactly the flags torch's own build of the extension uses (torch's
  ``_write_ninja_file_to_build_library``, the extension name left out: torch's headers do not use it). OUT then
  holds the header, its ``.gch`` and a ``key`` file; kf renames OUT to ``$KF_TORCH_PCH_DIR/<key>`` (atomic).

The first build of a set of flags requests the PCH; the builds after it use it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional, Sequence

__all__ = ["HEADER", "key", "lookup", "request", "allowed_flag", "build"]

#: The header the PCH is made of (and the name candidates' compiles -include).
HEADER = "kf_torch_extension.h"
_HEADER_TEXT = "// kf: torch's extension API, precompiled once per compiler, torch and flags\n" \
               "#pragma once\n#include <torch/extension.h>\n"
#: Format of the key; bump when what goes into a PCH changes.
_VERSION = "kf-torch-pch-1"
#: Exit code of ``python -m kernelfoundry.pch`` for a request this module refuses (a flag not allowed).
REFUSED_EXIT = 3

_ALLOWED = [re.compile(p) for p in (
    r"-O[0-3sgz]?", r"-Ofast",
    r"-std=(c|gnu)\+\+[0-9a-z]{2}",
    r"-[DU][A-Za-z_][A-Za-z0-9_]*(=[A-Za-z0-9_.+\-]*)?",
    r"-f(no-)?[a-z0-9][a-z0-9\-]*(=[A-Za-z0-9_.+\-]+)?",
    r"-m(no-)?[a-z0-9][a-z0-9\-]*(=[A-Za-z0-9_.+\-]+)?",
    r"-g[0-3]?", r"-W(no-)?[a-z0-9][a-z0-9\-]*(=[a-z0-9]+)?", r"-w", r"-pthread", r"-pedantic",
)]
#: -f options that read or write files, load code or change what the compiler runs.
_DENIED_F = ("-fplugin", "-fno-plugin", "-fdump", "-fprofile", "-fauto-profile", "-fstack-usage", "-fcallgraph",
             "-fdiagnostics-", "-fsave-optimization", "-fopt-info", "-frecord", "-finstrument", "-fpch")


def allowed_flag(flag: str) -> bool:
    """True when ``flag`` only tunes the compile of a fixed header (see the module comment)."""
    if any(flag.startswith(p) for p in _DENIED_F):
        return False
    return any(p.fullmatch(flag) for p in _ALLOWED)


def _file_id(path: str) -> str:
    st = os.stat(path)
    return f"{os.path.realpath(path)}:{st.st_size}:{st.st_mtime_ns}"


def key(extra_cflags: Sequence[str]) -> Optional[str]:
    """The PCH key (64 hex characters) of compiling a torch extension with ``extra_cflags`` here, or None when
    it cannot be known (no compiler or no torch found). Over: the compiler binary ($CXX as torch picks it: path,
    size, mtime), torch (where it is and its version.py), this Python, and the flags. Imports nothing heavy."""
    cxx = shutil.which(os.environ.get("CXX", "c++"))
    spec = importlib.util.find_spec("torch")
    if cxx is None or spec is None or not spec.origin:
        return None
    torch_dir = os.path.dirname(os.path.realpath(spec.origin))
    try:
        with open(os.path.join(torch_dir, "version.py"), "rb") as f:
            torch_version = hashlib.sha256(f.read()).hexdigest()
        parts = [_VERSION, _file_id(cxx), torch_dir, torch_version, sys.version, json.dumps(list(extra_cflags))]
    except OSError:
        return None
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8", "surrogateescape") + b"\0")
    return h.hexdigest()


def lookup(extra_cflags: Sequence[str]) -> tuple[Optional[list[str]], str]:
    """For a build child: (flags to add to the compile, a note for the build log). The flags are
    ``-include <header> -Winvalid-pch`` when kf published a PCH for these flags in ``$KF_TORCH_PCH_DIR``; else
    None, after writing a request into ``$KF_TORCH_PCH_REQUESTS`` (when set). Never raises: without a PCH the
    build is what it was."""
    root = os.environ.get("KF_TORCH_PCH_DIR", "")
    if not root:
        return None, ""
    try:
        k = key(extra_cflags)
        if k is None:
            return None, "no precompiled header: compiler or torch not found"
        header = os.path.join(root, k, HEADER)
        if re.fullmatch(r"[A-Za-z0-9_./\-]+", header) is None:  # goes through a shell (ninja): plain paths only
            return None, "no precompiled header: the cache path has characters a shell would interpret"
        if os.path.isfile(header + ".gch"):
            return ["-include", header, "-Winvalid-pch"], f"precompiled header {k[:16]}"
        if not all(allowed_flag(f) for f in extra_cflags):
            bad = next(f for f in extra_cflags if not allowed_flag(f))
            return None, f"no precompiled header: flag {bad!r} is not on the allow-list"
        requests = os.environ.get("KF_TORCH_PCH_REQUESTS", "")
        if requests:
            request(Path(requests), k, extra_cflags)
            return None, f"no precompiled header yet: requested {k[:16]}"
        return None, "no precompiled header yet"
    except OSError as e:
        return None, f"no precompiled header: {e}"


def request(directory: Path, k: str, extra_cflags: Sequence[str]) -> None:
    """Writes the request ``<directory>/<k>.json`` (temp file + rename)."""
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".req.", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump({"extra_cflags": list(extra_cflags)}, f)
    os.replace(tmp, directory / f"{k}.json")


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
        print("usage: python -m kernelfoundry.pch REQUEST.json OUT_DIR", file=sys.stderr)
        return 2
    try:
        k = build(Path(argv[0]), Path(argv[1]))
    except ValueError as e:
        print(f"kernelfoundry.pch: refused: {e}", file=sys.stderr)
        return REFUSED_EXIT
    except (OSError, RuntimeError) as e:
        print(f"kernelfoundry.pch: {e}", file=sys.stderr)
        return 1
    print(f"kernelfoundry.pch: built {k}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
