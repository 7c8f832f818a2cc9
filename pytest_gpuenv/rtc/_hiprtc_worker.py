"""Run one hiprtc compile in a child process: ``python _hiprtc_worker.py LIBRARY < request.json``.

Run by path (not as part of the package) so the child imports nothing but the standard library.
Why a child process: Debian's ROCm 5.2 hiprtc aborts the whole process (``munmap_chunk(): invalid
pointer``) for an arch it does not know, such as gfx942 or gfx1100, and hiprtc inside
libamdhip64 may start the HIP runtime; neither may happen inside the pytest process.

LIBRARY is a path: ``libhiprtc.so*`` / ``libamdhip64.so*`` on Linux, ``hiprtc<MM><mm>.dll`` on native
Windows, whose folder (the HIP SDK's ``bin``, with amd_comgr and hiprtc-builtins) is added to the DLL
search path first.

Request: {"source": str, "name": str, "options": [str], "names": [str]} (names: name expressions,
optional). Reply on stdout: {"result": int, "error": str, "log": str, "code": base64 str, "version": "M.m",
"lowered": {name expression: lowered name}} (a name hiprtc could not lower is left out).
"""

import base64
import ctypes
import json
import os
import sys


def load(path: str) -> ctypes.CDLL:
    """hiprtc's library; on Windows its folder is searched for the DLLs it depends on."""
    folder = os.path.dirname(path)
    if folder and hasattr(os, "add_dll_directory"):  # Windows, Python >= 3.8
        os.add_dll_directory(folder)
    return ctypes.CDLL(path)


def main() -> int:
    lib = load(sys.argv[1])
    req = json.loads(sys.stdin.read())
    lib.hiprtcGetErrorString.restype = ctypes.c_char_p
    major, minor = ctypes.c_int(), ctypes.c_int()
    version = None
    if lib.hiprtcVersion(ctypes.byref(major), ctypes.byref(minor)) == 0:
        version = f"{major.value}.{minor.value}"
    prog = ctypes.c_void_p()
    r = lib.hiprtcCreateProgram(
        ctypes.byref(prog), ctypes.c_char_p(req["source"].encode("utf-8", "surrogateescape")), req["name"].encode(),
        0, None, None
    )
    if r != 0:
        err = lib.hiprtcGetErrorString(r).decode()
        print(json.dumps({"result": r, "error": err, "log": "", "code": "", "version": version}))
        return 0
    names = [n.encode() for n in req.get("names", [])]
    for n in names:
        lib.hiprtcAddNameExpression(prog, n)
    opts = [o.encode() for o in req["options"]]
    r = lib.hiprtcCompileProgram(prog, len(opts), (ctypes.c_char_p * max(1, len(opts)))(*opts))
    n = ctypes.c_size_t()
    log = ""
    if lib.hiprtcGetProgramLogSize(prog, ctypes.byref(n)) == 0 and n.value:
        buf = ctypes.create_string_buffer(n.value + 1)
        lib.hiprtcGetProgramLog(prog, buf)
        log = buf.value.decode("utf-8", "replace")
    code = b""
    if r == 0 and lib.hiprtcGetCodeSize(prog, ctypes.byref(n)) == 0:
        buf = ctypes.create_string_buffer(n.value)
        lib.hiprtcGetCode(prog, buf)
        code = buf.raw
    lowered = {}
    for n in names if r == 0 else []:
        out = ctypes.c_char_p()
        if lib.hiprtcGetLoweredName(prog, n, ctypes.byref(out)) == 0 and out.value:
            lowered[n.decode()] = out.value.decode()
    lib.hiprtcDestroyProgram(ctypes.byref(prog))
    print(json.dumps({
        "result": r,
        "error": lib.hiprtcGetErrorString(r).decode(),
        "log": log,
        "code": base64.b64encode(code).decode(),
        "version": version,
        "lowered": lowered,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
