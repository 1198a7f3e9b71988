"""kernelfoundry.eval_pipeline.utils.memory_file_map — MemoryFileMap: a task package held in memory
(reference spec §2), implemented by kf::MemoryFileMap (include/kernelfoundry/memory_file_map.hpp).

Only :meth:`MemoryFileMap.open` is written here: it is stream glue over ``__getitem__`` / ``__setitem__``.
"""

from __future__ import annotations

import io
from typing import IO, Union

from .._core import MemoryFileMap

__all__ = ["MemoryFileMap"]


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


def _open(self: MemoryFileMap, path, mode: str = "r") -> Union[IO[str], IO[bytes]]:
    """Opens a file of the map like the reference: modes ``r`` / ``rb`` give a stream over a copy of the bytes
    (FileNotFoundError when absent); ``w`` / ``wb`` replace the file with an empty one now (meta: existing
    mode or 0o644, mtime now) and store what was written on flush/close. Text modes are UTF-8. Any other
    mode raises ValueError."""
    key = str(path)
    if mode in ("r", "rb"):
        data = self[key]
        if data is None:
            raise FileNotFoundError(f"File not found: {key}")
        stream = io.BytesIO(data)
        return stream if mode == "rb" else io.TextIOWrapper(stream, encoding="utf-8")
    if mode in ("w", "wb"):
        self[key] = b""
        writer = _WriteStream(self, key)
        return writer if mode == "wb" else io.TextIOWrapper(writer, encoding="utf-8")
    raise ValueError(f"Invalid mode: {mode}. Must be one of 'r', 'w', 'rb', 'wb'.")


MemoryFileMap.open = _open
