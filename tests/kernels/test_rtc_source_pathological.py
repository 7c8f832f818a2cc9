"""Pathological sources (unclosed blocks, comments and literals; 50,000 kernels) parse in linear time."""

from __future__ import annotations

import time

import pytest

from pytest_gpuenv.rtc.source import find_kernels, strip_comments

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
