"""The device-API table (scripts/device_api.py, docs/reference/device-api.md): every device function and type
of ROCm's headers (the extract kept in pytest_gpuenv/runtime/cpu/device_api/rocm_names.toml) is provided by
the CPU executor's headers or given a reason in not_provided.toml, no name given a reason is provided after
all, and the page is what the script generates. Offline: the extract is in the repository."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
from _checkout import REPO

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler")


@pytest.fixture(scope="module")
def device_api():
    spec = importlib.util.spec_from_file_location("device_api", Path(REPO) / "scripts" / "device_api.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_rocm_name_is_provided_or_given_a_reason_and_the_page_is_current(device_api):
    table, problems = device_api.rows()
    assert problems == []
    assert len(table) > 800 and sum(r.provided for r in table) > 750
    assert (Path(REPO) / "docs" / "reference" / "device-api.md").read_text(encoding="utf-8") == device_api.page()
    names = {r.name for r in table if r.provided}
    for name in ("__hsub2", "__hmax", "__hfma2", "h2exp", "__hisinf", "__half22float2", "__float22half2_rn",
                 "__hlt", "__byte_perm", "__brevll", "__funnelshift_l", "__mul64hi", "__sad", "__ldg",
                 "__double2hiint", "clock64", "wall_clock64", "__clock64", "unsafeAtomicAdd", "__ballot64",
                 "__mbcnt_lo", "__fns64", "__lastbit_u32_u64", "__hip_ds_swizzle", "__builtin_amdgcn_readfirstlane",
                 "__builtin_amdgcn_ds_bpermute", "__builtin_amdgcn_s_memtime"):
        assert name in names, name


def test_a_name_neither_provided_nor_given_a_reason_fails(device_api, tmp_path):
    text = (device_api.REASONS).read_text(encoding="utf-8")
    reasons = tmp_path / "reasons.toml"
    reasons.write_text(text.replace('"__builtin_amdgcn_s_getreg" =', '"unused_entry" ='), encoding="utf-8")
    _, problems = device_api.rows(reasons)
    assert any(p.startswith("__builtin_amdgcn_s_getreg (") and "neither provided" in p for p in problems)
    assert any(p.startswith("unused_entry:") and "no ROCm header declares it" in p for p in problems)


def test_a_reason_for_a_name_the_executor_provides_fails(device_api, tmp_path):
    reasons = tmp_path / "reasons.toml"
    reasons.write_text(device_api.REASONS.read_text(encoding="utf-8").replace(
        "[names]\n", '[names]\n"__hsub2" = "claimed missing"\n', 1), encoding="utf-8")
    _, problems = device_api.rows(reasons)
    assert problems == ["__hsub2: the executor provides it, but not_provided.toml gives a reason"]


def test_the_extraction_reads_declarations(device_api):
    src = """
    #define MACRO_FN(x) x
    #if A
    struct __attribute__((aligned(2))) S { int f(); };
    #else
    struct S2 {
    #endif
    typedef struct { unsigned short x; } raw_t;
    namespace cooperative_groups { class tile; template <unsigned N> tile tiled(int) { return {}; } }
    __device__ static inline int __popc(unsigned int x) { return __builtin_popcount(x); }
    __device__ int v = make(3);
    template <typename T> __device__ T __shfl(T v, int l) { return v; }
    """
    got = {(n.name, n.kind) for n in device_api.declared(src, "h")}
    assert got == {("MACRO_FN", "function"), ("S", "type"), ("raw_t", "type"), ("cooperative_groups::tile", "type"),
                   ("cooperative_groups::tiled", "function"), ("__popc", "function"), ("__shfl", "function")}
