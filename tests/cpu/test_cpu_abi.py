"""runtime/cpu/protocol.py declares every struct pytest and the CPU executor share; the executor's build
checks the C structs (src/include/gpuenv_cpu.h, src/protocol.h) against it field by field, through the
header protocol.py generates (``layout_header``). Here: that the check passes as the sources stand, and that
a declaration drifted on either side stops the build naming the field."""

from __future__ import annotations

import ctypes
import os
import subprocess

import pytest

from pytest_gpuenv.rtc import _cpu
from pytest_gpuenv.runtime.cpu import protocol, sources

CXX = _cpu.find_cxx()
needs_cxx = pytest.mark.skipif(CXX is None, reason="needs a C++ compiler")


def _compile_layout(tmp_path, header: str, src_dir: str = sources.SRC_DIR) -> subprocess.CompletedProcess:
    """protocol.h (every shared struct, and the checks) compiled against ``header`` as gpuenv_layout.h."""
    (tmp_path / sources.LAYOUT_HEADER).write_text(header)
    (tmp_path / "check.cpp").write_text('#include "protocol.h"\n')
    build = sources.executor_build()
    assert CXX is not None
    return subprocess.run([CXX, *[f for f in build.flags if f != "-shared"], f"-I{tmp_path}", f"-I{src_dir}",
                           "-fsyntax-only", str(tmp_path / "check.cpp")], capture_output=True, text=True, timeout=120)


@needs_cxx
def test_the_c_structs_follow_protocol_py(tmp_path) -> None:
    res = _compile_layout(tmp_path, protocol.layout_header())
    assert res.returncode == 0, res.stderr


@needs_cxx
def test_a_field_out_of_step_stops_the_build_naming_it(tmp_path, monkeypatch) -> None:
    # two fields of one size swapped (a size check would pass), and a request part that lost a field
    class Region(ctypes.Structure):
        _fields_ = [*protocol.Region._fields_[:2], protocol.Region._fields_[3], protocol.Region._fields_[2]]

    monkeypatch.setattr(protocol, "Region", Region)
    monkeypatch.setattr(protocol, "VALUE", protocol.Part(*protocol.VALUE.fields[:3]))
    res = _compile_layout(tmp_path, protocol.layout_header())
    assert res.returncode != 0
    assert "gpuenv_region_t.index: offset 16, 4 bytes, as Region.index in protocol.py" in res.stderr
    assert "value_t: 8 bytes, as VALUE in protocol.py" in res.stderr


@needs_cxx
def test_a_c_field_renamed_stops_the_build(tmp_path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    with open(os.path.join(sources.SRC_DIR, "protocol.h")) as f:
        text = f.read()
    assert "uint64_t addr;" in text
    (src / "protocol.h").write_text(text.replace("uint64_t addr;", "uint64_t address;"))
    os.symlink(sources.INCLUDE_DIR, src / "include")
    res = _compile_layout(tmp_path, protocol.layout_header(), str(src))
    assert res.returncode != 0
    assert "gpuenv_note_t" in res.stderr and "no member named" in res.stderr, res.stderr[-2000:]


def test_every_shared_struct_is_checked() -> None:
    declared = {name for name, value in vars(protocol).items()
                if isinstance(value, protocol.Part) or (isinstance(value, type) and issubclass(value, ctypes.Structure))}
    assert declared == set(protocol.C_STRUCTS)
    assert all(protocol.fields(getattr(protocol, name)) for name in declared)
