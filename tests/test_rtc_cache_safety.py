"""Attacks on the compile cache and the compile path, pathological sources included.

Each test reproduces the attack for real: real modes and owners (chown to another uid), checks that
depend on the effective user in a child process that drops to an unprivileged uid, FIFOs, device links,
a read-only and a full tmpfs, a wedged compiler script on PATH.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import warnings

import pytest
from _cache_hostile import FOREIGN, KEY, PLANTS, as_user, build, child, mount_tmpfs, public_dir, stub_key, wedged_tool

from pytest_gpuenv.rtc import CacheDirError, KernelCompileError, _cache, _compilers, _run
from pytest_gpuenv.rtc._cache import Cache, CacheWarning, encode_entry
from pytest_gpuenv.rtc._source import find_kernels, load_source, strip_comments

ROOT = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="requires root (chown, setuid)")


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    """Each test starts with no cache object and nothing warned yet in this process."""
    monkeypatch.setattr(_cache, "_WARNED", set())
    monkeypatch.setattr(_cache, "_SHARED", {})


@pytest.fixture
def public():
    """``public(mode)``: a folder another user can reach (removed afterwards)."""
    made: list = []
    yield lambda mode: made.append(public_dir(mode)) or made[-1]
    for path in made:
        shutil.rmtree(path, ignore_errors=True)


# ------------------------------------------------------------------ 3: every reachable header is in the key
#: case: (the include in k/k.hip, the header then changed, options); include_dirs inc/, inc2/; the compiler's own/
HEADER_CASES = {
    "angled-in-source-dir": ("#include <cfg.h>", "k/cfg.h", []),  # the attack: -I<source dir>
    "quoted-next-to-header": ("#include <sub/a.h>", "inc/sub/b.h", []),
    "option-I": ("#include <o.h>", "opt/o.h", ["-I", "{tmp}/opt"]),
    "option-I-joined": ("#include <o.h>", "opt/o.h", ["-I{tmp}/opt"]),
    "option-include": ("", "pre.h", ["-include", "{tmp}/pre.h"]),
    "shadowed-later-dir": ("#include <s.h>", "inc2/s.h", []),  # whichever the compiler takes
    "include-next": ("#include <n.h>", "inc2/n.h", []),
    "compiler-own-dir": ("", "own/hip/hip_runtime.h", []),  # its pre-include
    "inline-source-cwd": ('#include "cw.h"', "cw.h", []),
}


@pytest.mark.parametrize("case", list(HEADER_CASES))
def test_header_change_changes_the_key(tmp_path, monkeypatch, case):
    include, changed, options = HEADER_CASES[case]
    files = {"inc/sub/a.h": '#include "b.h"\n', "inc/s.h": "#define V 1\n", "inc/n.h": "#include_next <n.h>\n",
             changed: "#define V 1\n", "k/k.hip": include + '\nextern "C" __global__ void k(float* o) { o[0] = V; }\n'}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    options = [o.format(tmp=tmp_path) for o in options]
    monkeypatch.chdir(tmp_path)
    src = load_source(files["k/k.hip"] if case == "inline-source-cwd" else str(tmp_path / "k" / "k.hip"))
    dirs = [str(tmp_path / "inc"), str(tmp_path / "inc2")]
    before = stub_key(src, options, dirs, str(tmp_path / "own"))
    assert stub_key(src, options, dirs, str(tmp_path / "own")) == before
    (tmp_path / changed).write_text("#define V 2\n")
    assert stub_key(src, options, dirs, str(tmp_path / "own")) != before


def test_stale_kernel_attack_with_a_real_compiler(tmp_path):
    """The attack as filed: <scale.h> next to the kernel, changed after the first compile."""
    from pytest_gpuenv.rtc import compile_kernel

    pairs = (("nvrtc", "sm_90"), ("hiprtc", "gfx90a"), ("nvcc", "sm_90"), ("hipcc", "gfx90a"))
    arch = next((a for n, a in pairs if _compilers.get(n).available() and _compilers.get(n).supports(a)), None)
    if arch is None:
        pytest.skip(f"requires a HIP compiler: looked for {_compilers.looked_for()}")
    (tmp_path / "scale.h").write_text("#define SCALE 2.0f\n")
    (tmp_path / "k.hip").write_text('#include <scale.h>\nextern "C" __global__ void k(float* o) { o[0] *= SCALE; }\n')
    cache = str(tmp_path / "cache")
    first = compile_kernel(str(tmp_path / "k.hip"), "k", arch=arch, cache_dir=cache)
    assert compile_kernel(str(tmp_path / "k.hip"), "k", arch=arch, cache_dir=cache).cache_hit
    (tmp_path / "scale.h").write_text("#define SCALE 3.0f\n")
    again = compile_kernel(str(tmp_path / "k.hip"), "k", arch=arch, cache_dir=cache)
    assert not again.cache_hit and again.binary != first.binary


# ------------------------------------------------------------------ 4: corrupt entry under -W error
def test_corrupt_entry_is_removed_before_the_warning(tmp_path):
    c = Cache(str(tmp_path / "c"))
    c.get_or_compile(KEY, build(b"good"))
    with open(c.entry_path(KEY), "r+b") as f:
        f.seek(-1, 2)
        f.write(b"X")
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)  # what -W error does
        with pytest.raises(CacheWarning, match=r"compile cache entry .* is corrupt \(checksum mismatch\)"):
            c.get_or_compile(KEY, build(b"good"))
        assert not os.path.lexists(c.entry_path(KEY))  # removed before the warning was raised
        assert c.get_or_compile(KEY, build(b"good"))[1:] == (b"good", False)  # the next run rebuilds, no warning
    assert c.get_or_compile(KEY, build(b"other"))[1:] == (b"good", True)


@pytest.mark.slow
def test_corrupt_entry_fails_one_pytest_run_under_W_error_not_every_run(pytester, tmp_path):
    cache = tmp_path / "c"
    pytester.makepyfile(test_c=f"""
        from pytest_gpuenv.rtc._cache import Cache
        def test_c():
            assert Cache({str(cache)!r}).get_or_compile({KEY!r}, lambda: ({{}}, b"code"))[1] == b"code"
    """)
    args = ("-W", "error", "--gpuenv-backend=cpu", "-p", "no:cacheprovider", "-p", "no:benchmark")
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=1)
    entry = Cache(str(cache)).entry_path(KEY)
    with open(entry, "r+b") as f:
        f.truncate(20)
    failed = pytester.runpytest_subprocess(*args)
    failed.assert_outcomes(failed=1)
    failed.stdout.fnmatch_lines(["*CacheWarning: compile cache entry * is corrupt (truncated (20 bytes)); recompiling"])
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=1)


# ------------------------------------------------------------------ 5: the directory, on every open
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


# ------------------------------------------------------------------ 6: unusable folders never fail a compile
def test_cache_dir_that_is_a_file(tmp_path):
    path = tmp_path / "file"
    path.write_text("")
    with pytest.warns(CacheWarning) as got:
        for _ in range(2):
            assert _cache.shared(str(path)).get_or_compile(KEY, build(b"x"))[1:] == (b"x", False)
    assert [str(w.message) for w in got] == [
        f"the compile cache {path} cannot be used (Not a directory: {path}); kernels are compiled without a cache. "
        "To cache them, use a directory of your own: --gpuenv-cache-dir PATH (or GPUENV_CACHE_DIR, or XDG_CACHE_HOME)"]


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
    if not any(_compilers.get(n).available() for n in ("nvrtc", "hiprtc", "nvcc", "hipcc")):
        pytest.skip(f"requires a HIP compiler: looked for {_compilers.looked_for()}")
    (tmp_path / "file").write_text("")
    kernel = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "kernels", "vector_add.hip")
    p = child(["-m", "pytest_gpuenv", "compile", kernel, "--cache-dir", str(tmp_path / "file")])
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stderr.count("cannot be used (Not a directory") == 1 and "ok   vector_add" in p.stdout


# ------------------------------------------------------------------ 7: planted entries
@pytest.mark.parametrize("kind", sorted(PLANTS) + ["link-to-valid-entry", "foreign-owner"])
def test_planted_entry_is_removed_and_rebuilt(tmp_path, kind):
    c = Cache(str(tmp_path / "c"))
    p = c.entry_path(KEY)
    os.makedirs(os.path.dirname(p))
    valid = tmp_path / "valid.bin"
    valid.write_bytes(encode_entry({}, b"FORGED"))
    if kind == "link-to-valid-entry":
        os.symlink(valid, p)
    elif kind == "foreign-owner":
        if os.geteuid() != 0:
            pytest.skip("chown to another uid requires root")
        shutil.copyfile(valid, p)
        os.chown(p, FOREIGN, FOREIGN)
    else:
        PLANTS[kind](p)
    # in a child with a memory limit and a timeout: a FIFO must not hang it, /dev/zero not fill memory
    out = child(["-c", f"""
import warnings
from pytest_gpuenv.rtc._cache import Cache
c = Cache({c.path!r})
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    print([c.get_or_compile({KEY!r}, lambda: ({{}}, b"real"))[1:] for _ in range(2)])
print([str(x.message) for x in w])
"""], limit_memory=True)
    assert out.returncode == 0, out.stderr
    assert "[(b'real', False), (b'real', True)]" in out.stdout and out.stdout.count("is corrupt (") == 1


# ------------------------------------------------------------------ 10: wedged compilers
@pytest.mark.parametrize("tool, call, shown", [
    ("hipcc", lambda: _compilers.Hipcc().identity(), "hipcc --version"),
    ("nvcc", lambda: _compilers.Nvcc().identity(), "nvcc --version"),
    ("nvcc", lambda: _compilers.Nvcc().supports("sm_90"), "nvcc --list-gpu-code"),
])
def test_wedged_compiler_query_times_out_naming_the_command(tmp_path, monkeypatch, tool, call, shown):
    wedged_tool(tmp_path, monkeypatch, tool)
    monkeypatch.setattr(_compilers, "TOOL_TIMEOUT", 0.5)
    with pytest.raises(KernelCompileError, match=rf"{tmp_path}/bin/{shown} timed out after 0.5 s"):
        call()


def test_gpuenv_compile_with_a_wedged_nvcc_on_path(tmp_path, monkeypatch, capsys):
    from pytest_gpuenv.rtc._cli import compile_command

    wedged_tool(tmp_path, monkeypatch, "nvcc")
    monkeypatch.setattr(_compilers, "TOOL_TIMEOUT", 0.5)
    monkeypatch.setitem(_compilers._ALL, "nvcc", _compilers.Nvcc())
    (tmp_path / "k.hip").write_text('extern "C" __global__ void k(float* o) { o[0] = 1.0f; }\n')
    assert compile_command([str(tmp_path / "k.hip"), "--arch", "sm_90", "--compiler", "nvcc", "--no-cache"]) == 1
    assert f"FAIL k sm_90: {tmp_path}/bin/nvcc --version timed out after 0.5 s" in capsys.readouterr().out


def test_wedged_compile_is_killed_with_its_children(tmp_path):
    pidfile = tmp_path / "pid"
    t = time.monotonic()
    with pytest.raises(KernelCompileError, match=r"sh -c .* timed out after 0.5 s \(a wedged compiler\?\)"):
        _run.run_tool(["sh", "-c", f"sleep 60 & echo $! > {pidfile}; wait"], 0.5)
    assert time.monotonic() - t < 30  # the grandchild held the pipe: it was killed with its group
    pid = int(pidfile.read_text())
    time.sleep(0.1)
    assert not os.path.exists(f"/proc/{pid}") or "Z" in open(f"/proc/{pid}/stat").read().split()[2]


def test_compiler_that_cannot_start_is_a_compile_error(tmp_path):
    (tmp_path / "hipcc").write_text("not a program")  # not executable
    with pytest.raises(KernelCompileError, match=r"cannot run .*hipcc --version: \[Errno 13\]"):
        _run.run_tool([str(tmp_path / "hipcc"), "--version"], 5)


# ------------------------------------------------------------------ 11: pathological sources parse in linear time
PATHOLOGICAL = {  # name: (source, kernels found); before the fix the first two took 58 s and 38 s
    "unclosed-extern-c-104KB": (lambda: 'extern "C" {\n' * 8000, 0),
    "50000-kernels": (lambda: "".join(f'extern "C" __global__ void k{i}(float* a, int n) {{}}\n'
                                      for i in range(50_000)), 50_000),
    "unclosed-comments": (lambda: "/*" * 60_000, 0),
    "unclosed-char-literals": (lambda: "'\\'" * 40_000 + '\nextern "C" __global__ void z(int n) {}\n', 1),
    "unclosed-launch-bounds": (lambda: "__global__ __launch_bounds__(" * 8000 + ")", 0),
    "unclosed-parameter-lists": (lambda: "__global__ void f(" * 8000, 0),
}


@pytest.mark.parametrize("name", sorted(PATHOLOGICAL))
def test_pathological_source_parses_quickly(name):
    make, kernels = PATHOLOGICAL[name]
    text = make()
    t = time.perf_counter()
    found = find_kernels(text)
    strip_comments(text)
    took = time.perf_counter() - t
    assert len(found) == kernels
    assert took < 20, f"{name}: {took:.1f} s (quadratic again?)"
    if kernels == 50_000:
        k7 = found["k7"]
        assert found["k49999"].line == 50_000 and k7.extern_c and [p.name for p in k7.params] == ["a", "n"]


def test_unclosed_extern_c_block_still_marks_its_kernels():
    ks = find_kernels('extern "C" {\n__global__ void a(int n) {}\nextern "C" {\n__global__ void b(int n) {}\n}\n'
                      '__global__ void c(int n) {}\n')
    assert (ks["a"].extern_c, ks["b"].extern_c, ks["c"].extern_c) == (True, True, True)
    ks = find_kernels('extern "C" { __global__ void a(int n) {} }\n__global__ void m(int n) {}\n')
    assert (ks["a"].extern_c, ks["m"].extern_c) == (True, False)


@pytest.mark.skipif(sys.platform != "linux", reason="FIFOs and /dev/zero")
@pytest.mark.parametrize("kind", ["fifo", "dev-zero-link"])
def test_planted_header_does_not_hang_the_key(tmp_path, monkeypatch, kind):
    PLANTS[kind](str(tmp_path / "h.h"))
    (tmp_path / "k.hip").write_text('#include "h.h"\nextern "C" __global__ void k(int n) {}\n')
    out = child(["-c", "from _cache_hostile import stub_key\nfrom pytest_gpuenv.rtc._source import load_source\n"
                 f"print(len(stub_key(load_source({str(tmp_path / 'k.hip')!r}), [], [], {str(tmp_path)!r})))"],
                limit_memory=True, timeout=60)
    assert out.stdout.strip() == "64", out.stderr  # a key, without blocking on the FIFO or reading /dev/zero
