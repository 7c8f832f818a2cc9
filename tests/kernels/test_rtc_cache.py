"""The compile cache: keys, checksums, permissions, and one compile for many processes."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
import time

import pytest
from _checkout import REPO

from pytest_gpuenv.rtc import CacheDirError
from pytest_gpuenv.rtc.cache import Cache, CacheWarning, decode_entry, default_dir, encode_entry, make_key


def test_default_dir_is_per_user(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_dir() == str(tmp_path / "pytest-gpuenv")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_dir() == os.path.join(os.path.expanduser("~"), ".cache", "pytest-gpuenv")


def test_new_dir_is_0700(tmp_path):
    c = Cache(str(tmp_path / "a" / "b"))
    assert os.stat(c.path).st_mode & 0o777 == 0o700


def test_key_covers_every_input():
    parts = {"name": "k", "arch": "gfx90a", "options": [], "defines": {}, "compiler": "hiprtc:x"}
    base = make_key(parts, b"src", [("/i/a.h", b"A")])
    assert base == make_key(dict(parts), b"src", [("/i/a.h", b"A")])
    changed = [
        make_key({**parts, "name": "j"}, b"src", [("/i/a.h", b"A")]),
        make_key({**parts, "arch": "gfx1030"}, b"src", [("/i/a.h", b"A")]),
        make_key({**parts, "options": ["-O0"]}, b"src", [("/i/a.h", b"A")]),
        make_key({**parts, "defines": {"X": "1"}}, b"src", [("/i/a.h", b"A")]),
        make_key({**parts, "compiler": "hiprtc:y"}, b"src", [("/i/a.h", b"A")]),
        make_key(parts, b"src2", [("/i/a.h", b"A")]),
        make_key(parts, b"src", [("/i/a.h", b"B")]),  # a header changed
        make_key(parts, b"src", []),
    ]
    assert base not in changed and len(set(changed)) == len(changed)


def test_entry_roundtrip_and_corruption():
    blob = encode_entry({"arch": "sm_90"}, b"\x7fELF" + b"x" * 100)
    assert decode_entry(blob) == ({"arch": "sm_90"}, b"\x7fELF" + b"x" * 100)
    with pytest.raises(ValueError, match="truncated"):
        decode_entry(blob[:20])
    flipped = bytearray(blob)
    flipped[-1] ^= 1
    with pytest.raises(ValueError, match="checksum mismatch"):
        decode_entry(bytes(flipped))
    with pytest.raises(ValueError, match="checksum mismatch"):
        decode_entry(blob[:-10])


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty"])
def test_corrupt_entry_warns_and_recompiles(tmp_path, damage):
    c = Cache(str(tmp_path))
    calls = []

    def build():
        calls.append(1)
        return {"n": len(calls)}, b"code" * 50

    assert c.get_or_compile("ab" * 32, build)[2] is False
    p = c.entry_path("ab" * 32)
    with open(p, "rb") as fh:
        data = fh.read()
    with open(p, "wb") as f:
        f.write({"truncate": data[: len(data) // 2], "flip": data[:-1] + b"X", "empty": b""}[damage])
    with pytest.warns(CacheWarning, match=r"compile cache entry .* is corrupt \(.*\); recompiling"):
        meta, binary, hit = c.get_or_compile("ab" * 32, build)
    assert (meta, binary, hit, len(calls)) == ({"n": 2}, b"code" * 50, False, 2)
    assert c.get_or_compile("ab" * 32, build)[2] is True and len(calls) == 2


def test_group_or_world_writable_dir_refused(tmp_path):
    d = tmp_path / "cache"
    d.mkdir()
    os.chmod(d, 0o777)
    with pytest.raises(CacheDirError, match=r"refusing the compile cache .*: it is writable by group and others \(mode 777\)"):
        Cache(str(d))
    os.chmod(d, 0o720)
    with pytest.raises(CacheDirError, match=r"writable by group \(mode 720\).*would run on the GPU"):
        Cache(str(d))
    os.chmod(d, 0o750)
    Cache(str(d))  # readable by the group is fine


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown to another uid requires root")
def test_dir_owned_by_another_user_refused(tmp_path):
    d = tmp_path / "cache"
    d.mkdir(mode=0o700)
    os.chown(d, 12345, 12345)
    with pytest.raises(CacheDirError, match=r"owned by uid 12345, not by you \(uid 0\).*--gpuenv-cache-dir"):
        Cache(str(d))


_RACER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {repo!r})
    from pytest_gpuenv.rtc.cache import Cache
    start, cache_dir, log = float(sys.argv[1]), sys.argv[2], sys.argv[3]
    c = Cache(cache_dir)
    time.sleep(max(0.0, start - time.time()))
    def build():
        with open(log, "a") as f:
            f.write("compile\\n")
        time.sleep(0.5)
        return {{}}, b"code object"
    meta, binary, hit = c.get_or_compile("cd" * 32, build)
    assert binary == b"code object"
    print("hit" if hit else "miss")
    """
)


def test_eight_processes_compile_once(tmp_path):
    script = tmp_path / "racer.py"
    script.write_text(_RACER.format(repo=REPO))
    log = tmp_path / "compiles.log"
    start = time.time() + 1.5
    procs = [
        subprocess.Popen([sys.executable, str(script), str(start), str(tmp_path / "cache"), str(log)],
                         stdout=subprocess.PIPE, text=True)
        for _ in range(8)
    ]
    outs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert log.read_text().count("compile") == 1
    assert sorted(outs) == ["hit"] * 7 + ["miss"]



@contextlib.contextmanager
def _read_only(folder):
    """``folder`` made read-only: a tmpfs mounted there, remounted read-only, for root (whom modes do not
    stop), else its folders 0500. Yields ``freeze()``, which makes it read-only."""
    from _cache_hostile import mount_tmpfs

    if os.geteuid() == 0:
        with mount_tmpfs(folder, "size=1m") as remount:
            yield lambda: remount("ro")
        return
    folder.mkdir()
    frozen = []
    try:
        yield lambda: frozen.extend(d for d, _, _ in os.walk(folder)) or [os.chmod(d, 0o500) for d in frozen]
    finally:
        for d in frozen:
            os.chmod(d, 0o700)


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX")
def test_corrupt_entry_in_a_read_only_cache_fails_one_run_under_W_error_not_every_run(pytester, tmp_path, monkeypatch):
    """It cannot be removed there: the first run names it (and fails under -W error), later runs build that
    kernel uncached without a word (a marker in the private lock folder says it was named)."""
    monkeypatch.setenv("GPUENV_LOCK_DIR", str(tmp_path / "locks"))
    key, cache = "ab" * 32, tmp_path / "ro"
    pytester.makepyfile(test_c=f"""
        from pytest_gpuenv.rtc.cache import Cache
        def test_c():
            assert Cache({str(cache / "c")!r}).get_or_compile({key!r}, lambda: ({{}}, b"code"))[1] == b"code"
    """)
    args = ("-W", "error", "--gpuenv-backend=cpu", "-p", "no:cacheprovider", "-p", "no:benchmark")
    with _read_only(cache) as freeze:
        pytester.runpytest_subprocess(*args).assert_outcomes(passed=1)
        with open(Cache(str(cache / "c")).entry_path(key), "r+b") as f:
            f.truncate(20)
        freeze()
        runs = [pytester.runpytest_subprocess(*args, timeout=120) for _ in range(3)]
    runs[0].assert_outcomes(failed=1)
    runs[0].stdout.fnmatch_lines(["*CacheWarning: compile cache entry * is corrupt (truncated (20 bytes)); it cannot be "
                                  "removed (*), so it is compiled uncached from now on, named once on this machine*"])
    runs[1].assert_outcomes(passed=1)
    runs[2].assert_outcomes(passed=1)


# ------------------------------------------------------------- spellings only the preprocessor follows
SPELLINGS = {
    "continued": '#include \\\n"val.h"\n',
    "digraph": '%:include "val.h"\n',
    "macro": '#define VAL_H "val.h"\n#include VAL_H\n',
    "comment-across-lines": '#/*\n*/include "val.h"\n',
}
KERNEL = "#include <hip/hip_runtime.h>\nextern \"C\" __global__ void k(float* o) { o[0] = VAL; }\n"


def _key_makers(tmp_path):
    """name -> key(src) for every compiler whose key can be made here (none is run to compile)."""
    from _cache_hostile import stub_key

    from pytest_gpuenv.rtc import compilers
    from pytest_gpuenv.rtc._cpu import find_cxx, kernel_key
    from pytest_gpuenv.rtc.kernel import _cache_key
    from pytest_gpuenv.rtc.target import resolve

    makers = {"host preprocessor (stub)": lambda src: stub_key(src, [], [], str(tmp_path / "own"))}
    cxx = find_cxx()
    if cxx is not None:
        makers["cpu"] = lambda src: kernel_key(cxx, src, "k", resolve(None, 64, "7.0"), False, [], {}, [])
    for name, arch in (("nvrtc", "sm_90"), ("hiprtc", "gfx90a"), ("nvcc", "sm_90"), ("hipcc", "gfx90a")):
        comp = compilers.get(name)
        if comp.available():
            makers[name] = lambda src, comp=comp, arch=arch: _cache_key(src, "k", arch, comp, [], {}, [])
    return makers


@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_an_include_only_the_preprocessor_follows_is_in_the_key(tmp_path, spelling):
    from pytest_gpuenv.rtc.source import load_source

    (tmp_path / "k.hip").write_text(SPELLINGS[spelling] + KERNEL)
    (tmp_path / "val.h").write_text("#define VAL 1.0f\n")
    src = load_source(str(tmp_path / "k.hip"))
    makers = _key_makers(tmp_path)
    before = {name: key(src) for name, key in makers.items()}
    (tmp_path / "val.h").write_text("#define VAL 2.0f\n")
    stale = [name for name, key in makers.items() if key(src) == before[name]]
    assert not stale, f"the key did not change for {stale} (of {sorted(makers)})"


def test_a_macro_include_changed_rebuilds_the_cpu_kernel(tmp_path):
    """End to end on the CPU executor: the value read through ``#include VAL_H`` changes the binary."""
    from pytest_gpuenv.rtc import compile_kernel
    from pytest_gpuenv.rtc._cpu import find_cxx

    if find_cxx() is None:
        pytest.skip("requires a C++ compiler (g++, clang++)")
    (tmp_path / "k.hip").write_text(SPELLINGS["macro"] + KERNEL)
    (tmp_path / "val.h").write_text("#define VAL 1.0f\n")
    cache = str(tmp_path / "cache")
    first = compile_kernel(str(tmp_path / "k.hip"), "k", arch="cpu", cache_dir=cache)
    assert compile_kernel(str(tmp_path / "k.hip"), "k", arch="cpu", cache_dir=cache).cache_hit
    (tmp_path / "val.h").write_text("#define VAL 2.0f\n")
    again = compile_kernel(str(tmp_path / "k.hip"), "k", arch="cpu", cache_dir=cache)
    assert not again.cache_hit and again.binary != first.binary
