"""Building task extensions (reference spec §4.3 item 8, ``compile_torch_extension``).

The ``torch`` backend runs ``torch.utils.cpp_extension.load`` in a child interpreter (so a crashing or
hanging build cannot take the build script with it; the timeout kills the whole process group, compiler
included). Builds are cached: the build directory is ``$KF_CACHE_DIR/torch_ext/<hash>`` (default
``~/.cache/kernelfoundry``), keyed by the source bytes (plus headers next to the sources), flags, backend,
gpu_arch, torch and Python versions, so an identical source is never rebuilt. The built module is copied
into ``output_dir`` as ``<extension_name>.so`` and its absolute path is returned in a list.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Optional, Sequence, Union

__all__ = ["compile_torch_extension", "cache_dir", "LOAD_FAILED_EXIT"]

#: Exit code of the child when the extension compiled but could not be imported (the "load" phase).
LOAD_FAILED_EXIT = 87
#: Bumped when the cache layout or the child script changes.
_CACHE_VERSION = "kf-torch-ext-1"
#: Linker flags travel inside the flag list (so they enter the cache key) with this prefix.
_LDFLAG_PREFIX = "kf-ld:"
_HEADER_SUFFIXES = {".h", ".hh", ".hpp", ".hxx", ".cuh", ".inl", ".inc", ".ipp", ".tpp"}

_CHILD = r"""
import json, sys, traceback
cfg = json.loads(sys.argv[1])
try:
    from torch.utils import cpp_extension
except Exception:
    traceback.print_exc()
    sys.exit(2)
try:
    cpp_extension.load(name=cfg["name"], sources=cfg["sources"], build_directory=cfg["build_dir"],
                       extra_cflags=cfg["cflags"], extra_ldflags=cfg.get("ldflags") or None, verbose=True)
except ImportError:
    traceback.print_exc()
    sys.exit(%d)
except BaseException:
    traceback.print_exc()
    sys.exit(1)
""" % LOAD_FAILED_EXIT

PathLike = Union[str, os.PathLike]


def cache_dir() -> Path:
    """``$KF_CACHE_DIR`` or ``~/.cache/kernelfoundry``."""
    return Path(os.environ.get("KF_CACHE_DIR") or Path.home() / ".cache" / "kernelfoundry")


def _torch_version() -> str:
    try:
        from importlib.metadata import version  # noqa: PLC0415

        return version("torch")
    except Exception:
        import torch  # noqa: PLC0415

        return str(torch.__version__)


def _cache_key(name: str, sources: list[Path], cflags: list[str], backend: str, gpu_arch: str) -> str:
    h = hashlib.sha256()

    def add(tag: str, data: bytes) -> None:
        h.update(tag.encode() + b"\0" + len(data).to_bytes(8, "little") + data)

    add("version", _CACHE_VERSION.encode())
    add("name", name.encode())
    add("backend", backend.encode())
    add("gpu_arch", gpu_arch.encode())
    add("cflags", json.dumps(cflags).encode())
    add("torch", _torch_version().encode())
    add("python", sys.version.encode())
    add("executable", sys.executable.encode())
    seen: set[Path] = set()
    for src in sources:
        add("source:" + src.name, src.read_bytes())
    for folder in sorted({s.parent for s in sources}):
        for header in sorted(folder.iterdir()):
            if header.suffix.lower() in _HEADER_SUFFIXES and header.is_file() and header not in seen:
                seen.add(header)
                add("header:" + header.name, header.read_bytes())
    return h.hexdigest()[:32]


def _descendants(root: int) -> list[int]:
    """Process ids below ``root`` (from /proc; ninja puts its jobs in their own process groups, so killing
    our process group alone would leave the compilers running)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(b")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out: list[int] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out


def _kill_tree(pid: int) -> None:
    """Stops the whole tree below ``pid`` first (nobody forks or gets re-parented away), then kills it."""
    stopped: set[int] = set()
    for _ in range(20):
        new = [p for p in [pid] + _descendants(pid) if p not in stopped]
        if not new:
            break
        for p in new:
            try:
                os.kill(p, signal.SIGSTOP)
            except ProcessLookupError:
                pass
            stopped.add(p)
    for p in stopped:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _run_child(cmd: list[str], env: dict, cwd: Path, timeout: float) -> tuple[int, str]:
    """Runs cmd in its own session; on timeout kills its whole process tree. Returns (exit code, output)."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_tree(proc.pid)
        out, _ = proc.communicate()
        text = out.decode("utf-8", "replace")
        raise RuntimeError(f"compilation timed out after {timeout} s (build processes killed)\n{text}") from None
    except BaseException:  # e.g. KeyboardInterrupt: never leave compilers behind
        _kill_tree(proc.pid)
        proc.wait()
        raise
    return proc.returncode, out.decode("utf-8", "replace")


def _build_torch(name: str, sources: list[Path], build_dir: Path, cflags: list[str], gpu_arch: str,
                 timeout: float) -> Path:
    env = dict(os.environ)
    if gpu_arch and gpu_arch not in ("cpu", "native"):
        env["TORCH_CUDA_ARCH_LIST"] = gpu_arch
        env["TORCH_XPU_ARCH_LIST"] = gpu_arch
    cfg = {"name": name, "sources": [str(s) for s in sources], "build_dir": str(build_dir),
           "cflags": [f for f in cflags if not f.startswith(_LDFLAG_PREFIX)],
           "ldflags": [f[len(_LDFLAG_PREFIX):] for f in cflags if f.startswith(_LDFLAG_PREFIX)]}
    rc, out = _run_child([sys.executable, "-c", _CHILD, json.dumps(cfg)], env, build_dir, timeout)
    if rc == LOAD_FAILED_EXIT:
        raise RuntimeError(f"torch extension '{name}' compiled but failed to load (exit {rc}):\n{out}")
    if rc != 0:
        raise RuntimeError(f"failed to compile torch extension '{name}' (exit {rc}):\n{out}")
    built = build_dir / f"{name}.so"
    if not built.is_file():
        raise RuntimeError(f"torch extension '{name}' built without producing {built}:\n{out}")
    return built


def _build_icpx(name: str, sources: list[Path], build_dir: Path, cflags: list[str], gpu_arch: str,
                timeout: float) -> Path:
    """SYCL build with icpx: compile, device-link, link against torch (spec §4.3 item 8)."""
    if shutil.which("icpx") is None:
        raise RuntimeError("backend 'icpx' needs the icpx compiler on PATH")
    import torch  # noqa: PLC0415
    from torch.utils import cpp_extension  # noqa: PLC0415

    includes = [f"-I{p}" for p in cpp_extension.include_paths()] + [f"-I{sysconfig.get_paths()['include']}"]
    torch_lib = Path(torch.__file__).parent / "lib"
    ext = build_dir / f"{name}.so"
    objs = [build_dir / f"{s.stem}.o" for s in sources]
    steps = [["icpx", "-fsycl", "-fsycl-targets=spir64_gen,spir64", "-sycl-std=2020", "-std=c++17", "-fPIC",
              f"-DTORCH_EXTENSION_NAME={name}", *includes, *[f for f in cflags if not f.startswith(_LDFLAG_PREFIX)], "-c", str(s), "-o", str(o)]
             for s, o in zip(sources, objs)]
    link_obj = build_dir / f"{name}_device_link.o"
    steps.append(["icpx", "-fsycl", "-fsycl-targets=spir64_gen,spir64", "-fsycl-link", "--offload-compress",
                  "-Xs", f"-device {gpu_arch}", *map(str, objs), "-o", str(link_obj)])
    steps.append(["icpx", "-fsycl", "-shared", *map(str, objs), str(link_obj), f"-L{torch_lib}",
                  f"-Wl,-rpath,{torch_lib}", "-lc10", "-ltorch_cpu", "-ltorch", "-ltorch_python", "-o", str(ext)])
    log = []
    for cmd in steps:
        rc, out = _run_child(cmd, dict(os.environ), build_dir, timeout)
        log.append("$ " + " ".join(cmd) + "\n" + out)
        if rc != 0:
            raise RuntimeError(f"failed to compile extension '{name}' with icpx (exit {rc}):\n" + "\n".join(log))
    return ext


def compile_torch_extension(extension_name: str, src: Union[PathLike, Sequence[PathLike]], output_dir: PathLike,
                            gpu_arch: str, timeout: float = 120, backend: str = "torch",
                            extra_cflags: Optional[Sequence[str]] = None,
                            extra_ldflags: Optional[Sequence[str]] = None) -> list[str]:
    """Builds a Python extension module from ``src`` (one path or a list) and copies it to
    ``<output_dir>/<extension_name>.so`` (mode 0755). Returns ``[absolute path]``.

    ``backend``: "torch" (``torch.utils.cpp_extension.load``; CPU or CUDA sources) or "icpx" (SYCL).
    ``extra_cflags`` default to ``["-O3"]`` (torch adds no optimisation flag by itself). ``gpu_arch`` is
    exported as TORCH_CUDA_ARCH_LIST / TORCH_XPU_ARCH_LIST unless it is "cpu" or "native". ``timeout`` (s)
    bounds the whole build. Raises RuntimeError with the compiler output on failure or timeout, and
    ValueError for an unknown backend or a missing source."""
    if backend not in ("torch", "icpx"):
        raise ValueError(f"compile_torch_extension: unknown backend {backend!r} (expected 'torch' or 'icpx')")
    if not extension_name.isidentifier():
        raise ValueError(f"compile_torch_extension: extension_name {extension_name!r} is not a Python identifier")
    raw = [src] if isinstance(src, (str, os.PathLike)) else list(src)
    sources = [Path(s).resolve() for s in raw]
    for s in sources:
        if not s.is_file():
            raise ValueError(f"compile_torch_extension: source {s} does not exist")
    cflags = ["-O3"] if extra_cflags is None else [str(f) for f in extra_cflags]
    # extra_ldflags (e.g. ["-fopenmp"]) are passed to the link step (torch backend only).
    cflags += [_LDFLAG_PREFIX + str(f) for f in (extra_ldflags or [])]
    gpu_arch = "" if gpu_arch is None else str(gpu_arch)
    out_dir = Path(output_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)

    key = _cache_key(extension_name, sources, cflags, backend, gpu_arch)
    root = cache_dir() / "torch_ext"
    build_dir = root / key
    build_dir.mkdir(parents=True, exist_ok=True)
    built = build_dir / f"{extension_name}.so"
    done = build_dir / "kf_build_ok"
    with open(root / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build per key at a time; waiters then hit the cache
        if done.is_file() and built.is_file():
            print(f"kernelfoundry: using cached build of '{extension_name}' ({build_dir})", file=sys.stderr)
        else:
            done.unlink(missing_ok=True)
            # torch's own baton file survives a killed build and would make the next build wait forever;
            # we hold the per-key lock, so nobody else is building here.
            (build_dir / "lock").unlink(missing_ok=True)
            builder = _build_torch if backend == "torch" else _build_icpx
            built = builder(extension_name, sources, build_dir, cflags, gpu_arch, timeout)
            done.write_text(json.dumps({"sources": [str(s) for s in sources], "cflags": cflags}))
        dest = out_dir / f"{extension_name}.so"
        fd, tmp = tempfile.mkstemp(prefix=f".{extension_name}.", suffix=".tmp", dir=out_dir)
        os.close(fd)
        try:
            shutil.copyfile(built, tmp)
            os.chmod(tmp, 0o755)
            os.replace(tmp, dest)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return [str(dest)]
