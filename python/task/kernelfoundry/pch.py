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
* kf, on the trusted side, after the build runs ``python -m kernelfoundry.pch_build REQUEST OUT`` (host side:
  python/host/kernelfoundry/pch_build.py, never on a candidate's path) in a sandboxed child that may write only
  OUT. It recomputes the key from the request with :func:`key` (the file name is not trusted),
  accepts only flags from an allow-list (optimisation, language standard, macros, code-generation ``-f``/``-m``
  options and warnings; never ``-I``, ``-include``, ``-fplugin``, ``-specs``, ``-B``, ``-Wp,``/``-Wa,``/``-Wl,``
  or ``@file``), and compiles the header with exactly the flags torch's own build of the extension uses (torch's
  ``_write_ninja_file_to_build_library``, the extension name left out: torch's headers do not use it). OUT then
  holds the header, its ``.gch`` and a ``key`` file; kf renames OUT to ``$KF_TORCH_PCH_DIR/<key>`` (atomic).

The first build of a set of flags requests the PCH; the builds after it use it. Only builds whose sources include
torch's headers (:func:`uses_torch_headers`) look it up at all. This module is the task side's
half (key, allow-list, lookup, request); the builder imports the key and the allow-list from here, so both halves
compute the same key.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Optional, Sequence

__all__ = ["HEADER", "key", "lookup", "request", "allowed_flag", "uses_torch_headers"]

#: The header the PCH is made of (and the name candidates' compiles -include).
HEADER = "kf_torch_extension.h"
#: Format of the key; bump when what goes into a PCH changes.
_VERSION = "kf-torch-pch-1"

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


#: An #include of torch's, ATen's or c10's headers (what the PCH holds), at the start of a line.
_TORCH_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*[<"](torch|ATen|c10)/', re.MULTILINE)
#: A quoted #include of a local header, followed to see whether it includes torch.
_LOCAL_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"', re.MULTILINE)


def uses_torch_headers(sources: Sequence[Path], depth: int = 4) -> bool:
    """True when a source, or a local header it includes with quotes (resolved beside the including file,
    ``depth`` levels deep), includes a header of torch, ATen or c10. The PCH is only worth ``-include``-ing then:
    forced into a translation unit that uses none of torch (a pybind11-only module, a helper), it costs that unit
    ~20 s of parsing and code generation for nothing. A file that cannot be read counts as using them (the build
    is then what it was with the PCH)."""
    seen: set[Path] = set()
    todo = [(Path(s), 0) for s in sources]
    while todo:
        path, level = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        try:
            text = path.read_bytes()
        except OSError:
            return True
        if _TORCH_INCLUDE.search(text):
            return True
        if level < depth:
            for m in _LOCAL_INCLUDE.finditer(text):
                local = path.parent / os.fsdecode(m.group(1))
                if local.is_file():
                    todo.append((local, level + 1))
    return False


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
