"""The hiprtc stand-in header (pytest_gpuenv/rtc/include_hiprtc/hip/hip_runtime.h) keeps int32_t, uint32_t,
int64_t and uint64_t at global scope and in std, which published kernels use: hiprtc before ROCm 7 declares
them there itself (clr amd_hip_runtime.h under __HIPCC_RTC__), ROCm 7 only in namespace __hip_internal.
Checked by compiling the header as hiprtc reaches it (``-D__HIPCC_RTC__``, the real header found by
``#include_next``) over a stand-in for each release's header, with the host compiler."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from pytest_gpuenv.rtc.source import HIPRTC_INCLUDE

CXX = shutil.which("clang++") or shutil.which("clang++-15") or shutil.which("g++")
pytestmark = pytest.mark.skipif(CXX is None, reason="no C++ compiler")

ROCM6 = """#pragma once
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef signed int int32_t;
typedef signed long long int64_t;
namespace std { using ::uint32_t; using ::uint64_t; using ::int32_t; using ::int64_t; }
"""
ROCM7 = """#pragma once
namespace __hip_internal {
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef signed int int32_t;
typedef signed long long int64_t;
}
"""
KERNEL = """#include <hip/hip_runtime.h>
uint32_t a; int32_t b; int64_t c; uint64_t d; std::uint32_t e; std::int64_t f;
static_assert(sizeof(int64_t) == 8 && sizeof(uint32_t) == 4 && (int32_t)-1 < 0, "");
"""


@pytest.mark.parametrize("release", [ROCM6, ROCM7], ids=["rocm6", "rocm7"])
def test_published_kernels_find_the_fixed_width_integers(tmp_path, release):
    (tmp_path / "hip").mkdir()
    (tmp_path / "hip" / "hip_runtime.h").write_text(release)
    (tmp_path / "k.hip").write_text(KERNEL)
    r = subprocess.run([CXX, "-std=c++17", "-fsyntax-only", "-nostdinc++", "-D__HIPCC_RTC__", "-I", HIPRTC_INCLUDE,
                        "-I", str(tmp_path), "-x", "c++", str(tmp_path / "k.hip")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
