"""The argument copies of a CPU launch split over threads: every byte lands where a single memmove puts it."""

import ctypes

import pytest

from pytest_gpuenv.runtime.cpu.copies import PIECE_ALIGN, PIECE_MIN, copy_all, split


@pytest.mark.parametrize("pieces", [1, 2, 3, 5])
def test_split_covers_each_copy_once(pieces):
    moves = [(1 << 40, 1 << 30, 3 * PIECE_MIN + 7), (2 << 40, 2 << 30, 5), (3 << 40, 3 << 30, PIECE_MIN)]
    parts = split(moves, pieces)
    assert len(parts) <= pieces
    flat = [m for part in parts for m in part]
    for dst, src, n in moves:
        mine = sorted(m for m in flat if dst <= m[0] < dst + n)
        at = dst
        for d, s, k in mine:  # contiguous, source and destination cut at the same offsets
            assert d == at and s - src == d - dst and k > 0
            at += k
        assert at == dst + n
    assert all(sum(k for _, _, k in part) % PIECE_ALIGN == 0 for part in parts[:-1])


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_copy_all_matches_memmove(threads):
    sizes = [2 * PIECE_MIN + 123, 17, PIECE_MIN + 4096]
    srcs = [ctypes.create_string_buffer((bytes((i * 7 + j) % 251 for j in range(251)) * (n // 251 + 1))[:n], n)
            for i, n in enumerate(sizes)]
    dsts = [ctypes.create_string_buffer(n) for n in sizes]
    copy_all([(ctypes.addressof(d), ctypes.addressof(s), n) for d, s, n in zip(dsts, srcs, sizes)], threads)
    assert all(d.raw == s.raw for d, s in zip(dsts, srcs))


def _copy_threads():
    import threading

    return [t for t in threading.enumerate() if t.name.startswith("gpuenv-cpu-copy")]


def test_copy_threads_end_before_a_fork():
    import os

    sizes = [4 * PIECE_MIN]
    src, dst = ctypes.create_string_buffer(sizes[0]), ctypes.create_string_buffer(sizes[0])
    copy_all([(ctypes.addressof(dst), ctypes.addressof(src), sizes[0])], 2)
    assert _copy_threads()  # the pool outlives the launch...
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    assert not _copy_threads()  # ...but not a fork: the process forked with no copy thread
    copy_all([(ctypes.addressof(dst), ctypes.addressof(src), sizes[0])], 2)  # and it comes back
    assert dst.raw == src.raw
