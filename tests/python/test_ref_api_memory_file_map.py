"""Conformance of MemoryFileMap with the reference's own tests (tests/test_memory_file_map.py of the reference:
every fact it asserts, written here as our own tests) and with the way reference code uses the class: maps
built in place (``m = MemoryFileMap(); m.from_disk(src)``), the live ``file_map`` / ``meta_map`` attributes,
the legacy encoding, archive and disk round trips of mode and mtime."""

from __future__ import annotations

import base64
import io
import os
import tarfile
import zipfile

import pytest

from kernelfoundry.eval_pipeline import errors
from kernelfoundry.eval_pipeline.database.tables import Task as DBTask
from kernelfoundry.eval_pipeline.task import Task
from kernelfoundry.eval_pipeline.utils.custom_task_helper import update_block
from kernelfoundry.eval_pipeline.utils.memory_file_map import MemoryFileMap

PAST_MTIME = 1577836800  # 2020-01-01 UTC


def make_src(tmp_path):
    """A directory with a 0755 script (mtime PAST_MTIME) and a 0644 text file."""
    src = tmp_path / "src"
    src.mkdir()
    script = src / "build.sh"
    script.write_text("#!/bin/bash\necho hi\n")
    os.chmod(script, 0o755)
    os.utime(script, (PAST_MTIME, PAST_MTIME))
    plain = src / "notes.txt"
    plain.write_text("hello\n")
    os.chmod(plain, 0o644)
    return src


# ------------------------------------------------------------------ the reference's facts
def test_encode_decode_to_disk_roundtrip_keeps_mode_and_mtime(tmp_path):
    src_map = MemoryFileMap()
    src_map.from_disk(make_src(tmp_path))  # filled in place, as the reference's test does
    dst_map = MemoryFileMap()
    dst_map.decode(src_map.encode())  # the Celery / DB boundary
    out = tmp_path / "out"
    dst_map.to_disk(out)
    assert abs((out / "build.sh").stat().st_mtime - PAST_MTIME) < 2
    assert (out / "build.sh").stat().st_mode & 0o777 == 0o755
    assert (out / "notes.txt").stat().st_mode & 0o777 == 0o644
    assert (out / "build.sh").read_text() == "#!/bin/bash\necho hi\n"


def test_tarball_roundtrip_preserves_mode_and_mtime(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "run.sh").write_text("x")
    os.chmod(src / "run.sh", 0o755)
    os.utime(src / "run.sh", (PAST_MTIME, PAST_MTIME))
    src_map = MemoryFileMap()
    src_map.from_disk(src)
    dst_map = MemoryFileMap()
    dst_map.from_tarball(tarball_bytes=src_map.to_tarball())
    assert abs(dst_map.meta_map["run.sh"]["mtime"] - PAST_MTIME) < 2
    assert dst_map.meta_map["run.sh"]["mode"] == 0o755
    assert dst_map["run.sh"] == b"x"


def test_decode_legacy_string_format(tmp_path):
    m = MemoryFileMap()
    m.decode({"a.txt": base64.b64encode(b"hi").decode("utf-8")})
    assert m["a.txt"] == b"hi"
    assert m.meta_map["a.txt"]["mode"] == 0o644
    out = tmp_path / "out"
    m.to_disk(out)
    assert (out / "a.txt").read_text() == "hi"


def test_remove_root_dir_preserves_meta():
    m = MemoryFileMap()
    m["root/build.sh"] = b"x"
    m.meta_map["root/build.sh"]["mode"] = 0o755  # a live view: this changes the map
    m["root/sub/a.txt"] = b"y"
    assert m.remove_root_dir() is True
    assert "build.sh" in m.file_map and "sub/a.txt" in m.file_map
    assert "root/build.sh" not in m.file_map
    assert m.meta_map["build.sh"]["mode"] == 0o755
    assert m.meta_map["sub/a.txt"]["mode"] == 0o644


def test_update_block_preserves_exec_bit():
    m = MemoryFileMap()
    m["kernel.sh"] = "a\n# [EVOLVE_START]\nold\n# [EVOLVE_END]\nb\n".encode()
    m.meta_map["kernel.sh"]["mode"] = 0o755
    update_block(m, key="EVOLVE", path="kernel.sh", content="new")
    assert m.meta_map["kernel.sh"]["mode"] == 0o755
    assert m["kernel.sh"] == b"a\n# [EVOLVE_START]\nnew\n# [EVOLVE_END]\nb\n"


def test_task_hash_id_stable_across_encode_format():
    b64 = base64.b64encode(b"#!/bin/bash\necho hi\n").decode("utf-8")
    legacy_task = DBTask()
    legacy_task.generate_hash_id({"build.sh": b64})
    new_task = DBTask()
    new_task.generate_hash_id({"build.sh": {"content": b64, "mode": 0o755, "mtime": 123.0}})
    assert legacy_task.id == new_task.id
    assert len(legacy_task.id) == 64 and int(legacy_task.id, 16) >= 0
    # The same id as our C++ hash id of a Task holding that file, and as the reference's rule (config.yaml
    # skipped, contents hashed in sorted path order, paths themselves not hashed).
    import hashlib
    files = MemoryFileMap().decode({"build.sh": {"content": b64, "mode": 0o755, "mtime": 123.0},
                                    "config.yaml": {"content": base64.b64encode(b"task_name: x\n").decode()}})
    task = Task(files, True, True, [], [], {"task_name": "x", "task_origin": "custom"})
    assert task.hash_id() == legacy_task.id == hashlib.sha256(b64.encode()).hexdigest()
    renamed = DBTask()
    renamed.generate_hash_id({"other/name.sh": b64})
    assert renamed.id == legacy_task.id
    text = DBTask()
    text.generate_hash_id("plain text")
    assert text.id == hashlib.sha256(b"plain text").hexdigest()


# ------------------------------------------------------------------ loaders: in place and on the class
def test_loaders_fill_the_map_they_are_called_on_and_return_it(tmp_path):
    src = make_src(tmp_path)
    m = MemoryFileMap()
    m["keep.txt"] = b"kept"
    assert m.from_disk(src) is m
    assert sorted(m.list_files()) == ["build.sh", "keep.txt", "notes.txt"]
    assert m.meta_map["build.sh"]["mode"] == 0o755 and m.meta_map["build.sh"]["mtime"] == PAST_MTIME

    by_class = MemoryFileMap.from_disk(src)  # our class-level form still works
    assert sorted(by_class.list_files()) == ["build.sh", "notes.txt"]

    tgz = by_class.to_tarball()
    t = MemoryFileMap()
    assert t.from_tarball(tarball_bytes=tgz) is t and t == by_class.__class__.from_tarball(tarball_bytes=tgz)
    (tmp_path / "pkg.tar.gz").write_bytes(tgz)
    p = MemoryFileMap()
    assert p.from_tarball(tarball_path=tmp_path / "pkg.tar.gz") is p and sorted(p.list_files()) == ["build.sh", "notes.txt"]
    a = MemoryFileMap()
    assert a.from_archive(archive_bytes=tgz) is a and a["notes.txt"] == b"hello\n"
    q = MemoryFileMap()
    assert q.from_path(tmp_path / "pkg.tar.gz") is q and q["build.sh"] == b"#!/bin/bash\necho hi\n"
    d = MemoryFileMap()
    assert d.from_path(src, include_extensions=[".sh"]) is d and d.list_files() == ["build.sh"]
    e = MemoryFileMap()
    assert e.from_disk(input_dir=src, include_extensions=[".txt"]) is e and e.list_files() == ["notes.txt"]

    zbuf = io.BytesIO()
    with zipfile.ZipFile(zbuf, "w") as z:
        info = zipfile.ZipInfo("run.sh", date_time=(2020, 1, 2, 3, 4, 6))
        info.external_attr = (0o100755 << 16)
        z.writestr(info, "echo")
        dos = zipfile.ZipInfo("dos.txt", date_time=(2020, 1, 2, 3, 4, 6))
        dos.external_attr = 0x20  # only the DOS archive bit, as DOS-made zips: no Unix mode
        z.writestr(dos, "dos")
    z = MemoryFileMap()
    assert z.from_zip(zip_bytes=zbuf.getvalue()) is z
    assert z.meta_map["run.sh"]["mode"] == 0o755
    assert "mode" not in z.meta_map["dos.txt"] and "mtime" in z.meta_map["dos.txt"]
    import datetime
    assert z.meta_map["run.sh"]["mtime"] == datetime.datetime(2020, 1, 2, 3, 4, 6).timestamp()  # local time

    # A loaded path already in the map is replaced and keeps its place (dict assignment in the reference).
    m2 = MemoryFileMap()
    m2["notes.txt"] = b"old"
    m2["x"] = b"x"
    m2.from_disk(src)
    assert m2.list_files()[:2] == ["notes.txt", "x"] and m2["notes.txt"] == b"hello\n"


def test_loaders_take_exactly_one_source():
    m = MemoryFileMap()
    with pytest.raises(AssertionError):
        m.from_tarball()
    with pytest.raises(AssertionError):
        m.from_zip(zip_bytes=b"", zip_path="x.zip")
    with pytest.raises(AssertionError):
        MemoryFileMap.from_archive()
    with pytest.raises(ValueError):
        m.from_archive(archive_bytes=b"not an archive")
    assert len(m) == 0  # a failed load leaves the map as it was
    with pytest.raises(FileNotFoundError):
        m.from_path("/nonexistent/kf/pkg")


# ------------------------------------------------------------------ live file_map / meta_map
def test_file_map_is_a_live_view():
    m = MemoryFileMap()
    m["a.txt"] = b"alpha"
    fm = m.file_map
    assert "a.txt" in fm and "b.txt" not in fm and list(fm) == ["a.txt"] and len(fm) == 1
    assert fm["a.txt"].getvalue() == b"alpha" and fm["a.txt"].read() == b"alpha"
    m.meta_map["a.txt"]["mode"] = 0o700
    fm["a.txt"] = io.BytesIO(b"beta")  # stores the bytes, keeps the meta (the reference assigns streams)
    assert m["a.txt"] == b"beta" and m.meta_map["a.txt"]["mode"] == 0o700
    stream = fm["a.txt"]
    stream.seek(0, io.SEEK_END)
    stream.write(b"+")  # writes go to the map
    assert m["a.txt"] == b"beta+"
    fm["raw.bin"] = b"\x00\x01"
    assert m["raw.bin"] == b"\x00\x01" and "raw.bin" not in m.meta_map  # no meta, as the reference
    assert fm.get("missing") is None and "missing" not in m
    assert fm["new.txt"].getvalue() == b"" and "new.txt" in m  # defaultdict(BytesIO): reading creates it
    del fm["new.txt"]
    assert "new.txt" not in m and m.file_map.keys() == {"a.txt", "raw.bin"}


def test_meta_map_is_a_live_view():
    m = MemoryFileMap()
    m["p.sh"] = b"x"  # __setitem__ records the default meta
    meta = m.meta_map
    assert meta["p.sh"]["mode"] == 0o644 and isinstance(meta["p.sh"]["mtime"], float)
    meta["p.sh"]["mode"] = 0o755
    assert m.encode()["p.sh"]["mode"] == 0o755
    meta["p.sh"] = {"mode": 0o600, "mtime": 5.0}
    assert m.encode()["p.sh"] == {"content": "eA==", "mode": 0o600, "mtime": 5.0}
    assert meta == {"p.sh": {"mode": 0o600, "mtime": 5.0}} and dict(meta["p.sh"]) == {"mode": 0o600, "mtime": 5.0}
    del meta["p.sh"]["mtime"]
    assert m.encode()["p.sh"] == {"content": "eA==", "mode": 0o600}
    m["p.sh"] = b"y"  # a new write keeps the known mode, mtime now
    assert m.meta_map["p.sh"]["mode"] == 0o600 and m.meta_map["p.sh"]["mtime"] > 1e9
    del meta["p.sh"]
    assert "p.sh" not in meta and m.encode()["p.sh"] == {"content": "eQ=="}
    assert meta.get("p.sh", {}) == {}
    with pytest.raises(KeyError):
        meta["missing"] = {"mode": 0o644}
    with pytest.raises(KeyError):
        meta["missing"]
    with pytest.raises(KeyError):
        m.meta_map["p.sh"]


def test_views_of_a_task_write_the_task(tmp_path):
    files = MemoryFileMap().decode({"task.py": {"content": "eA==", "mode": 0o644, "mtime": 1.0}})
    task = Task(files, False, False, [], [], {"task_name": "t"})
    task.task_data.meta_map["task.py"]["mode"] = 0o755
    task.task_data.file_map["task.py"] = b"y"
    assert task.encode()["task_data"]["task.py"] == {"content": "eQ==", "mode": 0o755, "mtime": 1.0}
    task.task_data.from_disk(make_src(tmp_path))  # a loader called on a task's map fills that task
    assert sorted(task.encode()["task_data"]) == ["build.sh", "notes.txt", "task.py"]


# ------------------------------------------------------------------ open(), encode/decode, archives
def test_open_takes_the_reference_keyword_and_modes():
    m = MemoryFileMap()
    with m.open(file_path="t.txt", mode="w") as f:
        f.write("héllo\n")
    with m.open(file_path="t.txt", mode="r") as f:
        assert f.readlines() == ["héllo\n"]
    assert m.meta_map["t.txt"]["mode"] == 0o644
    with pytest.raises(ValueError):
        m.open("t.txt", "a")
    with pytest.raises(FileNotFoundError):
        m.open("none.txt")


def test_decode_merges_and_keeps_meta_only_when_given():
    m = MemoryFileMap()
    m.decode({"a": {"content": "YQ==", "mode": 0o700, "mtime": 2.5}})
    m.decode({"a": {"content": "Yg=="}, "b": {"content": "Yw==", "mtime": 3.0}})
    assert m["a"] == b"b" and m.meta_map["a"] == {"mode": 0o700, "mtime": 2.5}  # no meta given: the old stays
    assert m.meta_map["b"] == {"mtime": 3.0}
    assert m.encode() == {"a": {"content": "Yg==", "mode": 0o700, "mtime": 2.5}, "b": {"content": "Yw==", "mtime": 3.0}}
    m.clear()
    assert len(m) == 0 and len(m.meta_map) == 0


def test_to_tarball_modes_and_member_facts():
    m = MemoryFileMap().decode({"x.sh": {"content": "eA==", "mode": 0o755, "mtime": 1700000000.9},
                                "n.txt": {"content": "bg=="}})
    for mode, magic in (("w:gz", b"\x1f\x8b"), ("w:bz2", b"BZh"), ("w:xz", b"\xfd7zXZ")):
        assert m.to_tarball(mode).startswith(magic)
    with tarfile.open(fileobj=io.BytesIO(m.to_tarball("w"))) as tar:
        members = {t.name: t for t in tar.getmembers()}
    assert members["x.sh"].mode == 0o755 and members["x.sh"].mtime == 1700000000
    assert members["n.txt"].mode == 0o644 and members["n.txt"].size == 1  # no meta: 0644, mtime now


def test_to_zip_round_trip_keeps_mode_and_mtime():
    m = MemoryFileMap().decode({"d/run.sh": {"content": "ZWNobw==", "mode": 0o755, "mtime": 1577934246.0},
                                "d/a.txt": {"content": "YQ==", "mode": 0o640, "mtime": 1577934246.0}})
    data = m.to_zip()
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        assert sorted(z.namelist()) == ["d/a.txt", "d/run.sh"]
        assert (z.getinfo("d/run.sh").external_attr >> 16) & 0o777 == 0o755
    back = MemoryFileMap()
    back.from_zip(zip_bytes=data)
    assert back["d/run.sh"] == b"echo" and back.meta_map["d/run.sh"]["mode"] == 0o755
    assert back.meta_map["d/a.txt"]["mode"] == 0o640
    assert abs(back.meta_map["d/run.sh"]["mtime"] - 1577934246.0) <= 2  # zip keeps 2-second steps
    assert back.remove_root_dir() is True
    assert sorted(back.list_files()) == ["a.txt", "run.sh"] and back.meta_map["run.sh"]["mode"] == 0o755


def test_unsafe_archive_members_are_refused():
    evil = io.BytesIO()
    with tarfile.open(fileobj=evil, mode="w") as tar:
        info = tarfile.TarInfo("../escape.py")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"p"))
    m = MemoryFileMap()
    with pytest.raises(errors.UnsafeInputError):
        m.from_tarball(tarball_bytes=evil.getvalue())


def test_nul_byte_in_a_path_is_refused_and_nothing_is_overwritten(tmp_path):
    """Regression: ``m["a\\0evil"]`` was written to ``a`` by to_disk (the OS cuts the path at the NUL),
    silently replacing the entry ``a``."""
    m = MemoryFileMap()
    m["a"] = b"good"
    m["a\0evil"] = b"bad"
    with pytest.raises(errors.UnsafeInputError, match="NUL"):
        m.to_disk(str(tmp_path / "out"))
    assert not (tmp_path / "out" / "a").exists() or (tmp_path / "out" / "a").read_bytes() == b"good"
    with pytest.raises(errors.UnsafeInputError, match="NUL"):
        m.to_tarball()
