"""kernelfoundry.eval_pipeline.utils.memory_file_map — MemoryFileMap: a task package held in memory
(reference spec §2), implemented by kf::MemoryFileMap (include/kernelfoundry/memory_file_map.hpp).

What is written here is Python glue over the C++ methods, so that code written against the reference runs
unchanged:

- ``open()``: streams over ``__getitem__`` / ``__setitem__``.
- ``file_map`` and ``meta_map``: live views of the map's files and meta (the reference's attributes, a
  ``defaultdict(BytesIO)`` and a dict of ``{"mode", "mtime"}`` dicts): ``m.meta_map[p]["mode"] = 0o755`` and
  ``m.file_map[p] = BytesIO(b"x")`` change the map.
- The loaders ``from_disk``, ``from_path``, ``from_archive``, ``from_tarball``, ``from_zip``: called on a map
  (``m = MemoryFileMap(); m.from_disk(src)``, as the reference does) they add the files to that map and return
  it; called on the class (``MemoryFileMap.from_disk(src)``) they return a new map.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Iterator, MutableMapping
from typing import IO, Any, Callable, Optional, Union

from .._core import MemoryFileMap

__all__ = ["MemoryFileMap"]

_META_KEYS = ("mode", "mtime")


class _WriteStream(io.BytesIO):
    """A byte stream whose content is stored into the map on flush and close (reference: text data reach the
    stream on flush/close)."""

    def __init__(self, files: MemoryFileMap, key: str) -> None:
        super().__init__()
        self._files = files
        self._key = key

    def flush(self) -> None:
        super().flush()
        if not self.closed:
            self._files[self._key] = self.getvalue()

    def close(self) -> None:
        if not self.closed:
            self._files[self._key] = self.getvalue()
        super().close()


class _FileStream(io.BytesIO):
    """The stream ``file_map[path]`` gives: the file's bytes, positioned at 0; every write or truncate stores
    the whole content back into the map at once (the meta is left as it is, as for the reference's streams)."""

    def __init__(self, files: MemoryFileMap, key: str, data: bytes) -> None:
        super().__init__(data)
        self._files = files
        self._key = key

    def _store(self) -> None:
        self._files._store(self._key, self.getvalue())

    def write(self, b) -> int:  # type: ignore[override]
        n = super().write(b)
        self._store()
        return n

    def writelines(self, lines) -> None:  # type: ignore[override]
        super().writelines(lines)
        self._store()

    def truncate(self, size: Optional[int] = None) -> int:
        n = super().truncate(size)
        self._store()
        return n


def _content_bytes(value: Any) -> bytes:
    """The bytes of a value assigned to file_map[path]: a stream (getvalue() or read()) or bytes-like."""
    if hasattr(value, "getvalue"):
        return bytes(value.getvalue())
    if hasattr(value, "read"):
        if hasattr(value, "seek"):
            value.seek(0)
        return bytes(value.read())
    return bytes(value)


class _FileMapView(MutableMapping):
    """``m.file_map``: path -> byte stream, live. As the reference's ``defaultdict(BytesIO)``, reading a
    missing path creates an empty file; ``in``, ``get`` and iteration do not."""

    def __init__(self, files: MemoryFileMap) -> None:
        self._files = files

    def __getitem__(self, path) -> io.BytesIO:
        key = str(path)
        data = self._files[key]
        if data is None:  # defaultdict(BytesIO): a missing key becomes an empty file (without meta)
            self._files._store(key, b"")
            data = b""
        return _FileStream(self._files, key, data)

    def __setitem__(self, path, value) -> None:
        self._files._store(str(path), _content_bytes(value))

    def __delitem__(self, path) -> None:
        del self._files[str(path)]

    def __contains__(self, path) -> bool:
        return str(path) in self._files

    def __iter__(self) -> Iterator[str]:
        return iter(self._files.list_files())

    def __len__(self) -> int:
        return len(self._files)

    def get(self, path, default=None):
        key = str(path)
        return self[key] if key in self._files else default

    def __repr__(self) -> str:
        return f"file_map({self._files.list_files()!r})"


class _MetaEntry(MutableMapping):
    """``m.meta_map[path]``: {'mode': int, 'mtime': float} of one file, live (keys present when recorded)."""

    def __init__(self, files: MemoryFileMap, key: str) -> None:
        self._files = files
        self._key = key

    def _current(self) -> dict:
        meta = self._files._meta(self._key)
        if meta is None and self._key not in self._files:
            raise KeyError(self._key)
        return meta or {}

    def __getitem__(self, name: str):
        return self._current()[name]

    def __setitem__(self, name: str, value) -> None:
        if name not in _META_KEYS:
            raise KeyError(f"meta has only the keys 'mode' and 'mtime', not {name!r}")
        meta = self._current()
        meta[name] = value
        self._files._set_meta(self._key, meta)

    def __delitem__(self, name: str) -> None:
        meta = self._current()
        del meta[name]
        self._files._set_meta(self._key, meta)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._current()))

    def __len__(self) -> int:
        return len(self._current())

    def __repr__(self) -> str:
        return repr(self._current())


class _MetaMapView(MutableMapping):
    """``m.meta_map``: path -> {'mode', 'mtime'} for every file with recorded meta, live. Assigning sets a
    file's meta; a path that is not a file of the map is a KeyError."""

    def __init__(self, files: MemoryFileMap) -> None:
        self._files = files

    def __getitem__(self, path) -> _MetaEntry:
        key = str(path)
        if self._files._meta(key) is None:
            raise KeyError(key)
        return _MetaEntry(self._files, key)

    def __setitem__(self, path, meta) -> None:
        key = str(path)
        if key not in self._files:
            raise KeyError(f"{key}: no such file in the map (meta is kept per file)")
        self._files._set_meta(key, dict(meta))

    def __delitem__(self, path) -> None:
        key = str(path)
        if self._files._meta(key) is None:
            raise KeyError(key)
        self._files._set_meta(key, None)

    def __iter__(self) -> Iterator[str]:
        return iter([k for k in self._files.list_files() if self._files._meta(k) is not None])

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return repr({k: dict(v) for k, v in self.items()})


class _Loader:
    """A loader usable on the class (returns a new map) and on a map (adds the files to it, returns it)."""

    def __init__(self, load: Callable[..., MemoryFileMap]) -> None:
        self._load = load
        functools.update_wrapper(self, load)

    def __get__(self, obj, cls=None):
        if obj is None:
            return self._load

        @functools.wraps(self._load)
        def fill(*args, **kwargs):
            return obj._merge(self._load(*args, **kwargs))

        return fill


def _from_tarball(tarball_bytes: Optional[bytes] = None, tarball_path=None) -> MemoryFileMap:
    """Loads a tar archive (any compression) from bytes or a path; exactly one must be given (else
    InvalidArgumentError, an AssertionError). Meta: mode = member mode & 0o777, mtime = member mtime."""
    return MemoryFileMap._load_archive(tarball_bytes, tarball_path, "tarball_bytes", "tarball_path")


def _from_zip(zip_bytes: Optional[bytes] = None, zip_path=None) -> MemoryFileMap:
    """Loads a zip archive from bytes or a path; exactly one must be given. Meta: mode = (external_attr >> 16)
    & 0o777 when non-zero, mtime from the archive (local time)."""
    return MemoryFileMap._load_archive(zip_bytes, zip_path, "zip_bytes", "zip_path")


def _from_archive(archive_bytes: Optional[bytes] = None, archive_path=None) -> MemoryFileMap:
    """Loads a zip or tar archive (format sniffed from the content) from bytes or a path; exactly one must be
    given. ParseError (a ValueError) for anything that is not an archive."""
    return MemoryFileMap._load_archive(archive_bytes, archive_path, "archive_bytes", "archive_path")


def _from_disk(input_dir, include_extensions=None) -> MemoryFileMap:
    """Loads a directory tree (meta = stat mode & 0o777, stat mtime); ignored paths skipped, links and special
    files refused (UnsafeInputError). include_extensions: keep only these suffixes (case-insensitive)."""
    return MemoryFileMap._load_disk(input_dir, include_extensions)


def _from_path(path, include_extensions=None) -> MemoryFileMap:
    """A directory (from_disk) or an archive file (format sniffed). NotFoundError (FileNotFoundError) when
    missing."""
    return MemoryFileMap._load_path(path, include_extensions)


def _open(self: MemoryFileMap, file_path, mode: str = "r") -> Union[IO[str], IO[bytes]]:
    """Opens a file of the map like the reference: modes ``r`` / ``rb`` give a stream over a copy of the bytes
    (FileNotFoundError when absent); ``w`` / ``wb`` replace the file with an empty one now (meta: existing
    mode or 0o644, mtime now) and store what was written on flush/close. Text modes are UTF-8. Any other
    mode raises ValueError."""
    key = str(file_path)
    if mode not in ("r", "w", "rb", "wb"):
        raise ValueError(f"Invalid mode: {mode}. Must be one of 'r', 'w', 'rb', 'wb'.")
    if mode in ("r", "rb"):
        data = self[key]
        if data is None:
            raise FileNotFoundError(f"File not found: {file_path}")
        stream = io.BytesIO(data)
        return stream if mode == "rb" else io.TextIOWrapper(stream, encoding="utf-8")
    self[key] = b""
    writer = _WriteStream(self, key)
    return writer if mode == "wb" else io.TextIOWrapper(writer, encoding="utf-8")


MemoryFileMap.open = _open
MemoryFileMap.file_map = property(_FileMapView, doc="path -> byte stream (a live view; the reference's file_map).")
MemoryFileMap.meta_map = property(_MetaMapView,
                                  doc="path -> {'mode': int, 'mtime': float} (a live view; the reference's meta_map).")
MemoryFileMap.from_tarball = _Loader(_from_tarball)
MemoryFileMap.from_zip = _Loader(_from_zip)
MemoryFileMap.from_archive = _Loader(_from_archive)
MemoryFileMap.from_disk = _Loader(_from_disk)
MemoryFileMap.from_path = _Loader(_from_path)
