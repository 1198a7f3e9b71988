"""Type stubs of kernelfoundry.eval_pipeline.utils.memory_file_map (kf::MemoryFileMap, reference spec §2)."""

from io import BytesIO
from os import PathLike
from typing import IO, Iterator, MutableMapping, Optional, Sequence, Union

_Path = Union[str, PathLike]

class MemoryFileMap:
    """Files of a task package in memory: relative POSIX path -> bytes, plus meta {mode: permission bits,
    mtime: float epoch seconds}; insertion order kept. Loaders drop __pycache__/, .git/, __MACOSX/,
    .DS_Store, Thumbs.db, *.pyc, *.pyo, *.swp (B4 fixed: .gitignore and .github/ are kept) and refuse
    links, devices and paths escaping the root (UnsafeInputError). Limits: 10 000 files, 512 MiB per file,
    1 GiB in all (LimitExceededError)."""

    def __init__(self) -> None: ...
    def __contains__(self, path: object) -> bool: ...
    def __getitem__(self, path: object) -> Optional[bytes]:
        """The bytes, or None when absent (the reference does not raise)."""
    def __setitem__(self, path: object, data: bytes) -> None:
        """Stores bytes; meta = {existing mode or 0o644, mtime now}."""
    def __delitem__(self, path: object) -> None: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[str]: ...
    @property
    def meta_map(self) -> MutableMapping[str, MutableMapping[str, Union[int, float]]]:
        """{path: {'mode': int, 'mtime': float}} for the files with recorded meta — a live view:
        m.meta_map[p]['mode'] = 0o755 changes the file's mode; assigning m.meta_map[p] replaces its meta (KeyError
        for a path that is not a file of the map)."""
    @property
    def file_map(self) -> MutableMapping[str, BytesIO]:
        """{path: byte stream} — a live view (the reference's defaultdict(BytesIO)): the stream holds the
        file's bytes and writes to it are stored; assigning a stream or bytes stores them and keeps the meta;
        reading a missing path creates an empty file."""
    def open(self, file_path: object, mode: str = "r") -> IO:
        """'r'/'rb': a stream over a copy (FileNotFoundError when absent); 'w'/'wb': the file is replaced by an
        empty one now, written data land on flush/close. Other modes: ValueError."""
    def list_files(self) -> list[str]: ...
    def clear(self) -> None: ...
    def remove_root_dir(self) -> bool:
        """Strips the longest common leading directory (file names excluded; B1/B2 fixed); True if stripped."""
    def _check_valid_file(self, path: object) -> bool: ...
    def encode(self) -> dict[str, dict[str, Union[str, int, float]]]:
        """{path: {'content': base64 str, 'mode': int?, 'mtime': float?}}."""
    def decode(self, data: dict) -> MemoryFileMap:
        """Merges an encoding (also the legacy {path: base64}) into this map and returns it. ParseError on bad
        shapes or base64."""
    def to_tarball(self, mode: str = "w:gz") -> bytes:
        """A tar archive (mode 'w', 'w:gz', 'w:bz2', 'w:xz'): names = paths, mode = meta mode or 0o644, mtime
        = whole seconds of meta mtime or now."""
    def to_zip(self) -> bytes:
        """A zip archive: mode in the external attributes, mtime as local date/time (2-second steps)."""
    def to_disk(self, output_dir: _Path) -> None:
        """Writes every file under output_dir restoring mode and mtime (all paths checked first; files written to
        a temp name and renamed). UnsafeInputError / LimitExceededError / IoError."""
    # The loaders: called on a map (m.from_disk(src), as the reference does) they add the files to it and
    # return it; called on the class (MemoryFileMap.from_disk(src)) they return a new map.
    def from_tarball(self, tarball_bytes: Optional[bytes] = None, tarball_path: Optional[_Path] = None) -> MemoryFileMap:
        """A tar archive (any compression) from bytes or a path; exactly one must be given (InvalidArgumentError,
        an AssertionError, otherwise)."""
    def from_zip(self, zip_bytes: Optional[bytes] = None, zip_path: Optional[_Path] = None) -> MemoryFileMap:
        """Zip meta: mode = (external_attr >> 16) & 0o777 when non-zero; mtime from the archive."""
    def from_archive(self, archive_bytes: Optional[bytes] = None, archive_path: Optional[_Path] = None) -> MemoryFileMap:
        """Zip or tar, format sniffed from the content. Exactly one argument (InvalidArgumentError, an
        AssertionError, otherwise); ParseError for anything that is not an archive."""
    def from_disk(self, input_dir: _Path, include_extensions: Optional[Sequence[str]] = None) -> MemoryFileMap:
        """A directory tree (meta = stat mode & 0o777, stat mtime). include_extensions: keep only files whose
        lower-case suffix is listed, e.g. ['.py', '.cpp']."""
    def from_path(self, path: _Path, include_extensions: Optional[Sequence[str]] = None) -> MemoryFileMap:
        """A directory (from_disk) or an archive file. NotFoundError (FileNotFoundError) when missing."""
