"""Kernel arguments: checked against the declared parameter list and packed, before the GPU sees them.

Pure Python (ctypes, struct): torch and numpy are recognised by duck typing, never imported here.
"""

from __future__ import annotations

import ctypes
import functools
import math
import operator
import struct
from typing import Any, Optional, Sequence

from pytest_gpuenv.rtc.source import SCALAR_TYPES, Param, vector_name

_CTYPES: dict[str, type[ctypes._SimpleCData[Any]]] = {
    "?": ctypes.c_bool,
    "b": ctypes.c_int8,
    "B": ctypes.c_uint8,
    "h": ctypes.c_int16,
    "H": ctypes.c_uint16,
    "i": ctypes.c_int32,
    "I": ctypes.c_uint32,
    "q": ctypes.c_int64,
    "Q": ctypes.c_uint64,
    "f": ctypes.c_float,
    "d": ctypes.c_double,
    "e": ctypes.c_uint16,  # __half: the IEEE binary16 bits
    "P": ctypes.c_void_p,
}
_INT_RANGE = {c: (ctypes.sizeof(_CTYPES[c]) * 8, c.islower()) for c in "bBhHiIqQ"}
_FLOAT_MAX = {"f": 3.4028234663852886e38, "e": 65504.0}

#: element type of a pointer parameter -> accepted torch dtype names / array-interface typestr kinds
_ELEM = {
    "float": ("float32", "<f4"),
    "double": ("float64", "<f8"),
    "__half": ("float16", "<f2"),
    "half": ("float16", "<f2"),
    "int": ("int32", "<i4"),
    "int32_t": ("int32", "<i4"),
    "unsigned int": ("int32", "<u4"),  # torch has no uint32 tensors in common use; allow int32 storage
    "uint32_t": ("int32", "<u4"),
    "long": ("int64", "<i8"),
    "long long": ("int64", "<i8"),
    "int64_t": ("int64", "<i8"),
    "short": ("int16", "<i2"),
    "int16_t": ("int16", "<i2"),
    "char": ("int8", "|i1"),
    "int8_t": ("int8", "|i1"),
    "signed char": ("int8", "|i1"),
    "unsigned char": ("uint8", "|u1"),
    "uint8_t": ("uint8", "|u1"),
    "bool": ("bool", "|b1"),
}


def _describe(value: Any) -> str:
    t = type(value)
    if _is_tensor(value):
        return f"a {value.dtype} tensor on {value.device}"
    return f"{t.__module__}.{t.__qualname__}" if t.__module__ != "builtins" else t.__name__


def _is_tensor(value: Any) -> bool:
    t = type(value)
    return t.__module__.startswith("torch") and hasattr(value, "data_ptr") and hasattr(value, "device")


def _elem_of(p: Param) -> tuple[Optional[tuple[str, str]], int]:
    """(accepted torch dtype / typestr, scalars per element) of pointer parameter ``p``'s elements."""
    vec = p.vector
    if vec is None:
        return _ELEM.get(p.type), 1
    return next((v for k, v in _ELEM.items() if SCALAR_TYPES.get(k) == vec[0]), None), vec[1]


def check_count(p: Param, scalars: int, what: str) -> None:
    """A pointer to a vector type takes whole vectors: TypeError when ``scalars`` is not a multiple."""
    vec = p.vector
    if vec is not None and scalars % vec[1]:
        raise TypeError(f"argument {p.name!r} ({p.decl}) points to {vector_name(p.type)} ({vec[1]} scalars each): "
                        f"{what} has {scalars} scalars, not a whole number of {vector_name(p.type)}")


def _check_dtype(p: Param, got: str, typestr: Optional[str], what: str) -> None:
    want = _elem_of(p)[0]
    if want is None:
        return  # void*, structs: no check possible
    ok = got.replace("torch.", "") == want[0] if typestr is None else typestr[1:] == want[1][1:]
    # HIP's name of the type (float4, not the demangled HIP_vector_type<float, 4u>), and a vector's scalars
    elements = f"{vector_name(p.type)} elements" + (f" ({want[0]} scalars)" if p.vector is not None else "")
    if ok and typestr is not None and typestr[0] == ">" and typestr[2:] != "1":
        raise TypeError(f"argument {p.name!r} ({p.decl}) expects {elements} in the device's byte order "
                        f"(little-endian), got {what}: pass arr.astype('<{typestr[1:]}')")
    if not ok:
        raise TypeError(f"argument {p.name!r} ({p.decl}) expects {elements}, got {what}")


def pointer_arg(p: Param, value: Any, device: Optional[int], vendor: str) -> int:
    """Device pointer for a pointer parameter; TypeError naming the parameter otherwise."""
    if value is None:
        return 0
    if _is_tensor(value):
        dev = value.device
        if dev.type != "cuda":
            raise TypeError(
                f"argument {p.name!r} ({p.decl}) is a tensor on the {dev.type.upper()} ({dev}); "
                f"move it to the GPU, e.g. .to('cuda:{device if device is not None else 0}')"
            )
        if device is not None and dev.index is not None and dev.index != device:
            raise TypeError(
                f"argument {p.name!r} ({p.decl}) is on {dev}, but the kernel launches on cuda:{device}"
            )
        _check_dtype(p, str(value.dtype), None, _describe(value))
        if p.vector is not None:
            check_count(p, value.numel(), _describe(value))
        return int(value.data_ptr())
    cai = getattr(value, "__cuda_array_interface__", None)
    if cai is not None:
        _check_dtype(p, "", cai.get("typestr", "?"), f"an array of typestr {cai.get('typestr')!r}")
        return int(cai["data"][0])
    if hasattr(value, "__array_interface__"):
        raise TypeError(
            f"argument {p.name!r} ({p.decl}) is a host array ({_describe(value)}); pass a GPU tensor "
            "or an object with __cuda_array_interface__"
        )
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**64:
        return value  # a raw device address
    raise TypeError(
        f"argument {p.name!r} ({p.decl}) expects a device pointer (a GPU tensor, an object with "
        f"__cuda_array_interface__, or an int address), got {_describe(value)}"
    )


def scalar_arg(p: Param, code: str, value: Any) -> Any:
    """The Python value for a by-value scalar, range-checked; TypeError naming the parameter."""
    if _is_tensor(value) or hasattr(value, "__cuda_array_interface__"):
        raise TypeError(f"argument {p.name!r} ({p.decl}) is a scalar {p.type}, got {_describe(value)}")
    if code == "?":
        if isinstance(value, bool) or (type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_")):
            return bool(value)  # (numpy 2 names its scalar bool, numpy 1 bool_)
        raise TypeError(f"argument {p.name!r} ({p.decl}) expects a bool, got {_describe(value)}")
    if code in _INT_RANGE:
        if isinstance(value, (bool, float)) or type(value).__name__.startswith("float"):
            raise TypeError(f"argument {p.name!r} ({p.decl}) expects an integer, got {value!r}")
        try:
            v = operator.index(value)
        except TypeError:
            raise TypeError(f"argument {p.name!r} ({p.decl}) expects an integer, got {_describe(value)}") from None
        bits, signed = _INT_RANGE[code]
        lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
        if not lo <= v <= hi:
            raise TypeError(f"argument {p.name!r} ({p.decl}): {v} does not fit {p.type} (range {lo}..{hi})")
        return v
    # floats
    if isinstance(value, (str, bytes, bytearray)):  # float("1.5") would take a string
        raise TypeError(f"argument {p.name!r} ({p.decl}) expects a number, got {_describe(value)}")
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"argument {p.name!r} ({p.decl}) expects a number, got {_describe(value)}") from None
    limit = _FLOAT_MAX.get(code)
    if limit is not None and math.isfinite(f) and abs(f) > limit:
        raise TypeError(f"argument {p.name!r} ({p.decl}): {f!r} overflows {p.type} (max {limit:g})")
    if code == "e":
        return struct.unpack("<H", struct.pack("<e", f))[0]
    return f


#: a zero-length array of each gives a ctypes Structure that alignment without adding bytes
_ALIGN_TYPES: dict[int, Any] = {1: ctypes.c_char, 2: ctypes.c_int16, 4: ctypes.c_int32, 8: ctypes.c_int64, 16: ctypes.c_longdouble}


@functools.cache
def _vector_class(code: str, n: int, size: int, align: int) -> type[ctypes.Structure]:
    """A Structure of ``n`` elements of ``code`` with the compiler's size and alignment (float4: 16, 16)."""
    elem = _CTYPES[code]
    fields: list[tuple[str, Any]] = [("v", elem * n)]
    if align in _ALIGN_TYPES and ctypes.alignment(_ALIGN_TYPES[align]) == align:
        fields.insert(0, ("_align", _ALIGN_TYPES[align] * 0))
    if size > n * ctypes.sizeof(elem):
        fields.append(("_pad", ctypes.c_char * (size - n * ctypes.sizeof(elem))))
    return type(f"vector_{code}{n}", (ctypes.Structure,), {"_fields_": fields})


def aligned(cls: Any, align: int) -> Any:
    """A zeroed instance of ctypes type ``cls`` at an address that is a multiple of ``align``."""
    align = max(align, ctypes.alignment(cls), 1)
    buf = (ctypes.c_char * (ctypes.sizeof(cls) + align))()
    return cls.from_buffer(buf, (-ctypes.addressof(buf)) % align)


def value_arg(p: Param, value: Any) -> Any:
    """The ctypes value of a by-value vector (a tuple of numbers) or struct (a ctypes.Structure of the
    parameter's size), at the parameter's alignment; TypeError naming the parameter otherwise."""
    vec = p.vector
    if vec is not None:
        code, n = vec
        items = list(value) if isinstance(value, (tuple, list)) or type(value).__name__ == "ndarray" else None
        if items is None or len(items) != n:
            got = f"{len(items)} numbers" if items is not None else _describe(value)
            raise TypeError(f"argument {p.name!r} ({p.decl}) is a {vector_name(p.type)} by value: pass a tuple of {n} "
                            f"numbers, got {got}")
        esize = ctypes.sizeof(_CTYPES[code])
        out = aligned(_vector_class(code, n, max(p.size, n * esize), p.align or esize), p.align or esize)
        out.v[:] = [scalar_arg(p, code, v) for v in items]
        return out
    if isinstance(value, (ctypes.Structure, ctypes.Union, ctypes.Array)):
        if not p.size or ctypes.sizeof(value) != p.size:
            raise TypeError(f"argument {p.name!r} ({p.decl}) is a {vector_name(p.type)} of {p.size} bytes by value, got "
                            f"a ctypes {type(value).__name__} of {ctypes.sizeof(value)} bytes")
        out = aligned(type(value), p.align)
        ctypes.memmove(ctypes.addressof(out), ctypes.addressof(value), p.size)
        return out
    raise TypeError(f"argument {p.name!r} ({p.decl}) is a {vector_name(p.type)} by value ({p.size} bytes): pass a "
                    f"ctypes.Structure of that size, got {_describe(value)}")


def by_value(p: Param, code: Optional[str], value: Any) -> Any:
    """The ctypes value of a by-value argument: a scalar, vector or struct."""
    if code is not None:
        return _CTYPES[code](scalar_arg(p, code, value))
    if p.vector is None and not p.size:
        raise TypeError(
            f"argument {p.name!r} ({p.decl}): the size of {p.type!r} is unknown; pass a pointer or scalar types (int, "
            "unsigned, size_t, float, double, __half), or compile the kernel by a name expression")
    return value_arg(p, value)


class PackedArgs:
    """ctypes storage for each argument and the ``void*[]`` array the launch APIs take: ``values`` in
    parameter order (pointers as c_void_p, scalars as ctypes scalars, vectors and structs as ctypes
    Structures of the parameter's size at its alignment)."""

    def __init__(self, values: list[Any]) -> None:
        self.values = values
        self.array = (ctypes.c_void_p * max(1, len(values)))(*[ctypes.addressof(v) for v in values])

    @property
    def address(self) -> int:
        return ctypes.addressof(self.array)

    def __len__(self) -> int:
        return len(self.values)


def pack_args(
    kernel: str, params: Sequence[Param], args: Sequence[Any], device: Optional[int] = None, vendor: str = "nvidia"
) -> PackedArgs:
    """Check ``args`` against ``params`` and pack them; TypeError before anything reaches the GPU."""
    if len(args) != len(params):
        sig = ", ".join(p.decl for p in params)
        raise TypeError(f"kernel {kernel!r} takes {len(params)} arguments ({sig}), got {len(args)}")
    values: list[Any] = []
    for p, a in zip(params, args):
        code = p.code
        if code == "P":
            values.append(ctypes.c_void_p(pointer_arg(p, a, device, vendor)))
        else:
            values.append(by_value(p, code, a))
    return PackedArgs(values)


def launch_flag(value: Any, what: str) -> bool:
    """A launch's True/False option (``cooperative``); TypeError naming it for anything else."""
    if not isinstance(value, bool):
        raise TypeError(f"{what} must be True or False, got {value!r}")
    return value


def launch_dims(value: Any, what: str) -> tuple[int, int, int]:
    """An int or a tuple of up to 3 positive ints -> (x, y, z)."""
    dims = (value,) if not isinstance(value, (tuple, list)) else tuple(value)
    if not 1 <= len(dims) <= 3:
        raise TypeError(f"{what} must be an int or a tuple of 1 to 3 ints, got {value!r}")
    out = []
    for d in dims:
        try:
            v = operator.index(d)
        except TypeError:
            raise TypeError(f"{what} must be an int or a tuple of 1 to 3 ints, got {value!r}") from None
        if v < 1 or v >= 2**31:
            raise TypeError(f"{what} dimensions must be in 1..2**31-1, got {value!r}")
        out.append(v)
    while len(out) < 3:
        out.append(1)
    return out[0], out[1], out[2]
