"""Name expressions and the compiler's marker parsed, by-value vectors and structs packed: pure Python."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from _rtc_names import P

from pytest_gpuenv.rtc import KernelCompileError, Param
from pytest_gpuenv.rtc._args import pack_args
from pytest_gpuenv.rtc._cpu_kernel import pack_host_args
from pytest_gpuenv.rtc.names import _marker, param_of
from pytest_gpuenv.rtc.source import check_expr, vector_type


@pytest.mark.parametrize("bad", ["k; system(0)", "a{", "k<3", "", "k // c", '"k"'])
def test_bad_name_expressions_are_refused(bad):
    with pytest.raises(KernelCompileError, match="is not a kernel name"):
        check_expr(bad)


def test_marker_parse_and_demangled_types():
    d = ("void __gpuenv_lower<1, &(void reduce<float, 256u>(float*, float const*, unsigned long, HIP_vector_type<float, "
         "4u>, Params)), __gpuenv_sig<void (float*, float const*, unsigned long, HIP_vector_type<float, 4u>, Params), "
         "8ull, 8ull, 8ull, 16ull, 16ull, 8ull, 8ull, 8ull, 16ull, 8ull> >()")
    idx, fn, types, nums = _marker(d)
    assert (idx, fn) == (1, "void reduce<float, 256u>(float*, float const*, unsigned long, HIP_vector_type<float, 4u>, Params)")
    assert types == ["float*", "float const*", "unsigned long", "HIP_vector_type<float, 4u>", "Params"]
    assert nums == [8, 8, 8, 16, 16, 8, 8, 8, 16, 8]
    assert param_of("Mode", "m", 2, 2, enum=True).code == "h"  # an enum by value packs as an integer of its size
    assert _marker(d + " [clone .kd]") is None
    p = param_of("float const*", "in", 8, 8)
    assert (p.type, p.pointer, p.decl, p.code) == ("float", True, "const float* in", "P")
    p = param_of("HIP_vector_type<unsigned char, 4u>", "c", 4, 4)
    assert (p.decl, p.vector) == ("uchar4 c", ("B", 4))
    assert vector_type("float4") == ("f", 4) and vector_type("ulonglong2") == ("Q", 2) and vector_type("Params") is None


VEC4 = Param("v", "HIP_vector_type<float, 4u>", False, "float4 v", 16, 16)


VEC3 = Param("w", "HIP_vector_type<float, 3u>", False, "float3 w", 12, 4)


STRUCT = Param("p", "Params", False, "Params p", 16, 8)


UINT = param_of("unsigned int", "n", 4, 4)


def test_by_value_vectors_structs_and_typedefs_pack():
    packed = pack_args("k", [VEC4, VEC3, STRUCT, UINT], [(1, 2, 3, 4.5), [7, 8, 9], P(1.5, 2, 3.25), 5])
    v, w, s, n = packed.values
    assert (ctypes.sizeof(v), ctypes.sizeof(w), ctypes.sizeof(s), ctypes.sizeof(n)) == (16, 12, 16, 4)
    assert ctypes.addressof(v) % 16 == 0 and ctypes.addressof(s) % 8 == 0
    assert (ctypes.alignment(v), ctypes.alignment(w)) == (16, 4)  # the type says it too, for a copy elsewhere
    assert list(v.v) == [1.0, 2.0, 3.0, 4.5] and list(w.v) == [7.0, 8.0, 9.0]
    assert (s.a, s.b, s.c, n.value) == (1.5, 2, 3.25, 5) and isinstance(s, P)
    host = pack_host_args("k", [VEC4, STRUCT], [(0, 0, 0, 1), P()])
    assert bytes(host.values[0])[12:] == np.float32(1).tobytes() and list(host.buffers) == []


@pytest.mark.parametrize("param, value, message", [
    (VEC4, (1, 2, 3), r"argument 'v' \(float4 v\) is a float4 by value: pass a tuple of 4 numbers, got 3 numbers"),
    (VEC4, 1.0, r"argument 'v' \(float4 v\) is a .* by value: pass a tuple of 4 numbers, got float"),
    (VEC4, (1, 2, 3, "x"), r"argument 'v' \(float4 v\) expects a number, got str"),
    (Param("c", "HIP_vector_type<unsigned char, 4u>", False, "uchar4 c", 4, 4), (1, 2, 3, 256),
     r"argument 'c' \(uchar4 c\): 256 does not fit"),
    (STRUCT, (1, 2), r"argument 'p' \(Params p\) is a Params by value \(16 bytes\): pass a ctypes.Structure of that size, got tuple"),
    (STRUCT, ctypes.c_int * 2, r"argument 'p' \(Params p\) is a Params of 16 bytes by value, got a ctypes c_int_Array_2 of 8 bytes"),
    (UINT, -1, r"argument 'n' \(unsigned int n\): -1 does not fit unsigned int"),
])
def test_by_value_mismatch_is_a_type_error_naming_the_argument(param, value, message):
    if isinstance(value, type):
        value = value()
    with pytest.raises(TypeError, match=message):
        pack_args("k", [param], [value])
    with pytest.raises(TypeError, match=message):
        pack_host_args("k", [param], [value])


def test_pointer_to_vector_takes_scalar_arrays_in_whole_vectors():
    p = Param("x", "HIP_vector_type<float, 4u>", True, "float4* x", 8, 8)
    assert pack_host_args("k", [p], [np.zeros(8, np.float32)]).buffers[0].size == 32
    with pytest.raises(TypeError, match=r"argument 'x' \(float4\* x\) points to float4 \(4 scalars each\): an array of shape \(6,\) has 6 "
                       r"scalars, not a whole number of float4"):
        pack_host_args("k", [p], [np.zeros(6, np.float32)])
    with pytest.raises(TypeError, match=r"argument 'x' \(float4\* x\) expects float4 elements \(float32 scalars\), got an "
                                        r"array of typestr '<f8'"):
        pack_host_args("k", [p], [np.zeros(8, np.float64)])
