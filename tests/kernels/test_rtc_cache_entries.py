"""Corrupt and planted compile cache entries are removed and rebuilt, and warn once.

Each test reproduces the attack for real: a damaged entry under -W error, FIFOs, device links, symlinks and
foreign owners planted as entries, read in a child process with a memory limit and a timeout.
"""

from __future__ import annotations

import os
import shutil
import warnings

import pytest
from _cache_hostile import FOREIGN, KEY, PLANTS, build, child

from pytest_gpuenv.rtc.cache import Cache, CacheWarning, encode_entry

pytestmark = pytest.mark.usefixtures("fresh_compile_cache")


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
        from pytest_gpuenv.rtc.cache import Cache
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
from pytest_gpuenv.rtc.cache import Cache
c = Cache({c.path!r})
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    print([c.get_or_compile({KEY!r}, lambda: ({{}}, b"real"))[1:] for _ in range(2)])
print([str(x.message) for x in w])
"""], limit_memory=True)
    assert out.returncode == 0, out.stderr
    assert "[(b'real', False), (b'real', True)]" in out.stdout and out.stdout.count("is corrupt (") == 1
