"""Native Windows hiprtc: found by detection and by compilation, and loaded (issue 10 item 9).

ROCm/clr hipamd/src/hiprtc/CMakeLists.txt (tag rocm-6.2.0, lines 55-68): on WIN32 the library's
OUTPUT_NAME is ``hiprtc${HIP_MAJOR_VERSION}${HIP_MINOR_VERSION}`` with the major zero-padded to two
digits and the minor prefixed with "0" (``hiprtc0602.dll`` for HIP 6.2), beside the driver's
``amdhip64_<major>.dll``; ``hiprtc-builtins0602.dll`` is a helper DLL, not hiprtc's API. File trees
stand for the HIP SDK; the DLL itself is replaced at the ctypes boundary.
"""

from __future__ import annotations

import ctypes
import io
import json
import sys

import pytest

from pytest_gpuenv.detect import compilers as discovery
from pytest_gpuenv.detect import detect
from pytest_gpuenv.detect.fs import Fs
from pytest_gpuenv.rtc import _hiprtc_worker, compilers


def _sdk(root, version="6.2", dlls=("amdhip64_6.dll", "hiprtc0602.dll", "hiprtc-builtins0602.dll")):
    bin_dir = root / "C" / "Program Files" / "AMD" / "ROCm" / version / "bin"
    bin_dir.mkdir(parents=True)
    (root / "C" / "Windows" / "System32").mkdir(parents=True)
    for name in dlls:
        (bin_dir / name).write_bytes(b"MZ")
    return bin_dir


def test_file_tree_finds_the_versioned_dll_not_the_builtins(tmp_path):
    _sdk(tmp_path, dlls=("amdhip64_6.dll", "hiprtc-builtins0602.dll", "hiprtc0601.dll", "hiprtc0602.dll"))
    environ = {"HIP_PATH": "C:\\Program Files\\AMD\\ROCm\\6.2\\"}
    assert discovery.windows_hiprtc(Fs(str(tmp_path)), environ) == "/C/Program Files/AMD/ROCm/6.2/bin/hiprtc0602.dll"


def test_only_builtins_is_no_hiprtc(tmp_path):
    _sdk(tmp_path, dlls=("amdhip64_6.dll", "hiprtc-builtins0602.dll"))
    env = detect(root=str(tmp_path), probe="never", environ={"HIP_PATH": "C:\\Program Files\\AMD\\ROCm\\6.2"})
    assert env.kind == "hip-windows" and env.compilers["hiprtc"] is False


def test_detection_finds_hiprtc_dll(tmp_path):
    _sdk(tmp_path)
    env = detect(root=str(tmp_path), probe="never", environ={"HIP_PATH": "C:\\Program Files\\AMD\\ROCm\\6.2"})
    assert env.compilers["hiprtc"] is True


def test_compiler_finds_the_dll_on_native_windows(tmp_path, monkeypatch):
    bin_dir = _sdk(tmp_path)
    monkeypatch.setattr(discovery, "NATIVE_WINDOWS", True)
    monkeypatch.setenv("HIP_PATH", str(bin_dir.parent))
    hiprtc = compilers.Hiprtc()  # a fresh instance: the module's one caches the real system's answer
    assert hiprtc.library() == str(bin_dir / "hiprtc0602.dll")
    assert hiprtc.available()


def test_compiler_finds_the_dll_on_path(tmp_path, monkeypatch):
    bin_dir = _sdk(tmp_path)
    monkeypatch.setattr(discovery, "NATIVE_WINDOWS", True)
    monkeypatch.delenv("HIP_PATH", raising=False)
    monkeypatch.setenv("PATH", str(bin_dir))
    assert compilers.Hiprtc().library() == str(bin_dir / "hiprtc0602.dll")


class _FakeHiprtc:
    """hiprtc's C API as ctypes calls it: out-parameters come as byref(...) objects."""

    def __init__(self):
        self.hiprtcGetErrorString = lambda r: b"HIPRTC_SUCCESS" if r == 0 else b"HIPRTC_ERROR"

    def hiprtcVersion(self, major, minor):
        major._obj.value, minor._obj.value = 6, 2
        return 0

    def hiprtcCreateProgram(self, prog, src, name, n, headers, names):
        prog._obj.value = 1
        return 0

    def hiprtcCompileProgram(self, prog, n, opts):
        return 0

    def hiprtcGetProgramLogSize(self, prog, n):
        n._obj.value = 0
        return 0

    def hiprtcGetCodeSize(self, prog, n):
        n._obj.value = 4
        return 0

    def hiprtcGetCode(self, prog, buf):
        ctypes.memmove(buf, b"\x7fELF", 4)
        return 0

    def hiprtcDestroyProgram(self, prog):
        return 0


def test_worker_loads_the_dll_and_adds_its_folder(tmp_path, monkeypatch, capsys):
    dll = _sdk(tmp_path) / "hiprtc0602.dll"
    loaded, dirs = [], []
    monkeypatch.setattr(_hiprtc_worker.ctypes, "CDLL", lambda p: loaded.append(p) or _FakeHiprtc())
    monkeypatch.setattr(_hiprtc_worker.os, "add_dll_directory", dirs.append, raising=False)
    monkeypatch.setattr(sys, "argv", ["_hiprtc_worker.py", str(dll)])
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps({"source": "x", "name": "k.hip", "options": []})))
    assert _hiprtc_worker.main() == 0
    out = json.loads(capsys.readouterr().out)
    assert loaded == [str(dll)] and dirs == [str(dll.parent)]
    assert out["result"] == 0 and out["version"] == "6.2" and out["code"] == "f0VMRg=="


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX: no add_dll_directory")
def test_worker_on_posix_only_loads(monkeypatch):
    loaded = []
    monkeypatch.setattr(_hiprtc_worker.ctypes, "CDLL", lambda p: loaded.append(p) or _FakeHiprtc())
    _hiprtc_worker.load("/usr/lib/libhiprtc.so.6")
    assert loaded == ["/usr/lib/libhiprtc.so.6"]
