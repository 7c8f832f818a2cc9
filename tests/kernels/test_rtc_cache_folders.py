"""The compile cache's folder: checked on every open, and never the reason a compile fails.

Each test reproduces the attack for real: real modes and owners (chown to another uid), checks that
depend on the effective user in a child process that drops to an unprivileged uid, a read-only and a full
tmpfs.
"""

from __future__ import annotations

import os
import shutil
import warnings

import pytest
from _cache_hostile import FOREIGN, KEY, as_user, build, child, mount_tmpfs, public_dir
from _checkout import KERNELS

from pytest_gpuenv.rtc import CacheDirError, compilers
from pytest_gpuenv.rtc import cache as _cache
from pytest_gpuenv.rtc.cache import Cache, CacheWarning, encode_entry

pytestmark = pytest.mark.usefixtures("fresh_compile_cache")


ROOT = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="requires root (chown, setuid)")


@pytest.fixture
def public():
    """``public(mode)``: a folder another user can reach (removed afterwards)."""
    made: list = []
    yield lambda mode: made.append(public_dir(mode)) or made[-1]
    for path in made:
        shutil.rmtree(path, ignore_errors=True)


@ROOT
@pytest.mark.parametrize("swap", ["symlink-to-foreign", "foreign-dir", "made-writable", "subfolder-link"])
def test_cache_swapped_after_the_first_check_is_refused(tmp_path, swap):
    c = Cache(str(tmp_path / "cache"))
    assert c.get_or_compile(KEY, build(b"mine"))[1:] == (b"mine", False)
    theirs = tmp_path / "theirs"
    (theirs / "v1" / KEY[:2]).mkdir(parents=True)
    (theirs / "v1" / KEY[:2] / f"{KEY}.bin").write_bytes(encode_entry({}, b"FORGED"))  # a valid checksum
    for p in (theirs, theirs / "v1", theirs / "v1" / KEY[:2], theirs / "v1" / KEY[:2] / f"{KEY}.bin"):
        os.chown(p, FOREIGN, FOREIGN)
    os.chmod(theirs, 0o700)
    if swap == "symlink-to-foreign":
        os.rename(c.path, str(tmp_path / "old"))
        os.symlink(theirs, c.path)
    elif swap == "foreign-dir":
        os.rename(c.path, str(tmp_path / "old"))
        os.rename(theirs, c.path)
    elif swap == "made-writable":
        os.chmod(c.path, 0o777)
        shutil.copyfile(theirs / "v1" / KEY[:2] / f"{KEY}.bin", c.entry_path(KEY))
    else:
        sub = os.path.dirname(c.entry_path(KEY))
        os.rename(sub, sub + ".old")
        os.symlink(theirs / "v1" / KEY[:2], sub)
    why = {"symlink-to-foreign": "is a symbolic link now", "foreign-dir": "it is owned by uid 4242, not by you",
           "made-writable": "it is writable by group and others", "subfolder-link": "is a symbolic link now"}[swap]
    with pytest.raises(CacheDirError, match=why):
        c.get_or_compile(KEY, build(b"mine"))


@ROOT
@pytest.mark.parametrize("mode, owner, refused", [
    (0o777, 0, "writable by others without the sticky bit"),
    (0o1777, 0, None),  # /tmp: sticky, so nobody can rename your folder
    (0o755, FOREIGN, "is owned by uid 4242, who can replace the cache"),
    (0o775, 0, None),  # group-writable parents are accepted (user-private groups, umask 002)
])
def test_folder_above_the_cache(tmp_path, mode, owner, refused):
    parent = tmp_path / "parent"
    parent.mkdir()
    os.chmod(parent, mode)
    os.chown(parent, owner, 0)
    if refused:
        with pytest.raises(CacheDirError, match=refused):
            Cache(str(parent / "cache"))
    else:
        assert Cache(str(parent / "cache")).get_or_compile(KEY, build(b"x"))[2] is False


@ROOT
def test_ownership_is_checked_against_the_unprivileged_user(public):
    base = public(0o1777)
    (base / "roots").mkdir(mode=0o755)
    (base / "theirs").mkdir(mode=0o755)
    os.chown(base / "theirs", 4343, 4343)
    out = as_user(FOREIGN, f"""
        for path in ({str(base / 'roots')!r}, {str(base / 'theirs' / 'c')!r}):
            try:
                Cache(path)
            except CacheDirError as exc:
                print("refused:", exc)
        c = Cache({str(base / 'mine')!r})
        print([c.get_or_compile(KEY, lambda: ({{}}, b"x"))[2] for _ in range(2)])
    """)
    assert "it is owned by uid 0, not by you (uid 4242)" in out
    assert f"{base / 'theirs'} is owned by uid 4343, who can replace the cache" in out
    assert "[False, True]" in out


def test_cache_dir_that_is_a_file(tmp_path):
    path = tmp_path / "file"
    path.write_text("")
    with pytest.warns(CacheWarning) as got:
        for _ in range(2):
            assert _cache.shared(str(path)).get_or_compile(KEY, build(b"x"))[1:] == (b"x", False)
    assert [str(w.message) for w in got] == [
        f"the compile cache {path} cannot be used (Not a directory: {path}); kernels are compiled without a cache. "
        "To cache them, use a directory of your own: --gpuenv-cache-dir=PATH (or GPUENV_CACHE_DIR, or XDG_CACHE_HOME)"]


@ROOT
@pytest.mark.parametrize("home", ["/", None])
def test_no_usable_home(home):
    env = {"HOME": home} if home else {}
    out = as_user(FOREIGN, """
        c = Cache(None)
        print([c.get_or_compile(KEY, lambda: ({}, b"x"))[1:] for _ in range(2)])
    """, env=env)
    assert "[(b'x', False), (b'x', False)]" in out
    why = "(Permission denied: /.cache)" if home else "(there is no home directory (HOME is unset and uid 4242 has"
    assert out.count("cannot be used") == 1 and why in out and "use a directory of your own" in out


@ROOT
def test_read_only_cache_serves_hits_and_builds_the_rest_uncached(public):
    base = public(0o755)
    Cache(str(base / "c")).get_or_compile(KEY, build(b"old"))
    for d, _, files in os.walk(base / "c"):
        os.chown(d, FOREIGN, FOREIGN)
        os.chmod(d, 0o500)
        for f in files:
            os.chown(os.path.join(d, f), FOREIGN, FOREIGN)
    out = as_user(FOREIGN, f"""
        c = Cache({str(base / 'c')!r})
        print(c.get_or_compile(KEY, lambda: ({{}}, b"new"))[1:])
        print([c.get_or_compile(k * 64, lambda: ({{}}, b"new"))[1:] for k in "ef"])
    """)
    assert "(b'old', True)" in out and "[(b'new', False), (b'new', False)]" in out
    assert out.count("cannot be written (Permission denied") == 1


@ROOT
def test_read_only_filesystem(tmp_path):
    mnt = tmp_path / "mnt"
    with mount_tmpfs(mnt, "size=1m") as remount:
        Cache(str(mnt / "c")).get_or_compile(KEY, build(b"old"))
        remount("ro")
        c = Cache(str(mnt / "c"))
        with pytest.warns(CacheWarning, match=r"cannot be written \(Read-only file system: .*use a directory of your"):
            assert c.get_or_compile("ef" * 32, build(b"new"))[1:] == (b"new", False)
        assert c.get_or_compile(KEY, build(b"new"))[1:] == (b"old", True)


@ROOT
def test_full_disk(tmp_path):
    mnt = tmp_path / "mnt"
    with mount_tmpfs(mnt, "size=64k"):
        c = Cache(str(mnt / "c"))
        with pytest.warns(CacheWarning, match=r"cannot be written \(No space left on device.*free space on its disk"):
            assert c.get_or_compile(KEY, build(b"x" * 200_000))[1:] == (b"x" * 200_000, False)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # warned once: later compiles are quietly uncached
            assert c.get_or_compile("ef" * 32, build(b"y"))[1:] == (b"y", False)
        assert not [n for _, _, files in os.walk(mnt) for n in files if n.startswith(".tmp-")]


@pytest.mark.parametrize("mode, chmod", [(0o1777, False), (0o777, False), (0o2770, False), (0o770, True)])
def test_refusal_never_suggests_chmod_700_on_a_shared_folder(tmp_path, mode, chmod):
    d = tmp_path / "shared"
    d.mkdir()
    os.chmod(d, mode)
    with pytest.raises(CacheDirError, match="Use a directory of your own") as err:
        Cache(str(d))
    assert ("chmod 700" in str(err.value)) is chmod


def test_gpuenv_compile_with_an_unusable_cache_dir(tmp_path):
    if not any(compilers.get(n).available() for n in ("nvrtc", "hiprtc", "nvcc", "hipcc")):
        pytest.skip(f"requires a HIP compiler: looked for {compilers.looked_for()}")
    (tmp_path / "file").write_text("")
    kernel = os.path.join(KERNELS, "vector_add.hip")
    p = child(["-m", "pytest_gpuenv", "compile", kernel, "--cache-dir", str(tmp_path / "file")])
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stderr.count("cannot be used (Not a directory") == 1 and "ok   vector_add" in p.stdout
