"""kernelfoundry.eval_pipeline.utils.custom_task_helper — the reference's helpers for custom task packages:
blocks (reference spec §1.7), config (§1.4), test names (§1.8), with the reference's names and signatures.

The rules are the C++ core's (include/kernelfoundry/blocks.hpp, config.hpp, pytest_collect.hpp), so these
functions agree with what ``Task.create`` and ``kf`` do, including the fixes listed in README ("Where we
differ"): an unclosed ``[KEY_START]`` is an error, ``update_block`` keeps CRLF line endings and refuses
malformed markers, config files are found at the top level only, tests are collected once.
Errors are the classes of :mod:`kernelfoundry.eval_pipeline.errors`, which are also the builtins the
reference raises (``AssertionError`` / ``FileNotFoundError`` for a missing block or file, ``ValueError`` for
malformed markers).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Union

from .. import _core
from .memory_file_map import MemoryFileMap

__all__ = [
    "allowed_text_file_extensions",
    "get_test_names",
    "get_block",
    "has_build_step",
    "has_reference_build_step",
    "get_config",
    "update_block",
    "blocks_to_str",
]

_Root = Union[str, os.PathLike, MemoryFileMap]


def allowed_text_file_extensions() -> list[str]:
    """The file extensions scanned for blocks, in the reference's order ('.sycl', '.cu', '.cpp', …)."""
    return _core.block_extensions()


def get_test_names(task_root: Union[str, os.PathLike]) -> dict[str, list[str]]:
    """The pytest tests of the package in directory ``task_root`` (its task.py), from one collection:
    ``{'all_tests': [...], 'correctness_tests': [...], 'profile_tests': [...]}``; profile tests are the
    ``@pytest.mark.performance`` ones, all_tests lists the correctness tests, then the profile tests. Raises
    InvalidArgumentError (a ValueError / RuntimeError) with the collector's error text when task.py does not
    collect (the reference ignored the first collection's failures)."""
    return _core.collect_tests(task_root)


def _as_file_map(task_root: _Root) -> MemoryFileMap:
    return task_root if isinstance(task_root, MemoryFileMap) else MemoryFileMap.from_disk(task_root)


def get_block(task_root: _Root, key: str) -> dict[str, list[str]]:
    """The ``key`` blocks ('EVOLVE', 'REFERENCE', …) of a package (a directory or a MemoryFileMap):
    ``{relative_path: [content, ...]}`` for every scanned file holding one, paths sorted; each content without
    its leading and trailing blank lines. Raises ParseError (a ValueError) for a nested or unclosed START or a
    stray END."""
    return _core.blocks_get(_as_file_map(task_root), key)


def update_block(task: MemoryFileMap, key: str, path: Union[str, os.PathLike], content: str,
                 block_index: int = 0) -> None:
    """Replaces block ``block_index`` of ``key`` in file ``path`` of ``task`` in place with ``content`` (a
    newline is added when it does not end with one); the file keeps its mode, its mtime becomes now. Raises
    NotFoundError — a FileNotFoundError and an AssertionError, as the reference — for a missing file, a file
    without a ``key`` block or an index out of range; ParseError (ValueError) for malformed markers."""
    _core.blocks_update(task, key, str(path), content, block_index)


def find_path(task: MemoryFileMap, key: str) -> Optional[str]:
    """The first scanned file (sorted) whose text contains ``[KEY_START]``, or None."""
    marker = f"[{key}_START]".encode()
    for path in sorted(p for p in task.list_files() if _core.is_block_file(p)):
        if marker in (task[path] or b""):
            return path
    return None


def get_config(task_root: _Root, config_stem: str = "config") -> dict:
    """The package's ``<config_stem>.yaml`` / ``.yml`` (top level only) as a dict, typed and resolved as
    OmegaConf does. Raises NotFoundError (a FileNotFoundError) when there is none, InvalidArgumentError (a
    ValueError) when both exist, ParseError for broken YAML."""
    names = [config_stem + ".yaml", config_stem + ".yml"]
    if isinstance(task_root, MemoryFileMap):
        found = _core.config_find(task_root, config_stem)
        if found is None:
            raise FileNotFoundError(f"No {' or '.join(names)} found in the task files")
        return _core.config_load_text(task_root[found].decode("utf-8"), found)
    root = Path(task_root)
    present = [root / n for n in names if (root / n).is_file()]
    if not present:
        raise FileNotFoundError(f"No {' or '.join(names)} found in {root}")
    if len(present) > 1:
        raise ValueError(f"Multiple config files found in {root}: {[str(p) for p in present]}")
    return _core.config_load_text(present[0].read_text(encoding="utf-8"), str(present[0]))


def has_build_step(task_root: _Root) -> bool:
    """The config's ``has_build_step`` (default True): the package has a ``build()`` for the candidate."""
    return bool(get_config(task_root).get("has_build_step", True))


def has_reference_build_step(task_root: _Root) -> bool:
    """The config's ``has_reference_build_step`` (default True): the reference needs building."""
    return bool(get_config(task_root).get("has_reference_build_step", True))


def blocks_to_str(blocks: dict[str, list[str]]) -> str:
    """One key's blocks ``{path: [content, ...]}`` as one string: a single block is its content; several are
    ``"### Block: <path> ###\\n<content>"`` parts joined by newlines (paths sorted); none give ''."""
    return _core.blocks_to_str(blocks)


def dict_to_yaml_str(data: dict, indent: int = 0) -> str:
    """``data`` as block-style YAML (keys in their order), every line indented by ``indent`` spaces."""
    text = _core.dump_yaml(data)
    if indent > 0:
        text = "\n".join(" " * indent + line for line in text.splitlines())
    return text
