"""``base.paths.write_atomically``, the one writer of the files the run leaves: the mode a plain ``open`` gives,
without reading (so without setting) the process's umask; durable writes; nothing left when a write fails."""

import os
import stat

import pytest

from pytest_gpuenv.base.paths import write_atomically


@pytest.fixture
def umask_027():
    old = os.umask(0o027)
    try:
        yield
    finally:
        os.umask(old)


def test_the_file_gets_the_umask_mode_and_the_umask_is_never_touched(tmp_path, umask_027, monkeypatch):
    def no_umask(mask):
        raise AssertionError("os.umask changes it for every thread of the process")

    monkeypatch.setattr(os, "umask", no_umask)
    path = tmp_path / "sub" / "out.json"
    write_atomically(str(path), lambda f: f.write(b"{}"))
    assert path.read_bytes() == b"{}" and stat.S_IMODE(path.stat().st_mode) == 0o640
    assert os.listdir(path.parent) == ["out.json"]


def test_a_durable_write_is_fsynced_before_the_rename(tmp_path, monkeypatch):
    seen = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: seen.append(os.listdir(tmp_path)) or real_fsync(fd))
    write_atomically(str(tmp_path / "a.json"), lambda f: f.write(b"1"))
    assert seen == []
    write_atomically(str(tmp_path / "b.json"), lambda f: f.write(b"2"), durable=True)
    assert len(seen) == 1 and "b.json" not in seen[0]  # synced while still the temporary file


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path):
    path = tmp_path / "a.json"
    path.write_bytes(b"old")

    def fail(f):
        f.write(b"half")
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError, match="disk on fire"):
        write_atomically(str(path), fail)
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["a.json"]
