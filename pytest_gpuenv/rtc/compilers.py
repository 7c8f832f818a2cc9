"""The four compilers: hiprtc and hipcc for gfx targets, NVRTC and nvcc for sm targets.

Each knows whether it is installed, its identity and version (part of the cache key), which arches
it can build, and how to turn a Source into a code object. Where the tools, libraries and headers
are is asked of detection's discovery module (``pytest_gpuenv.detect.compilers``) on the real
system. Nothing here is imported or loaded until a compile asks for it; hiprtc runs in a child
process (see _hiprtc_worker.py).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import signal
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Any, Optional, Sequence

from pytest_gpuenv.detect import compilers as discovery
from pytest_gpuenv.detect.fs import Fs
from pytest_gpuenv.rtc._run import compile_error, file_id, run_tool
from pytest_gpuenv.rtc.errors import KernelCompileError
from pytest_gpuenv.rtc.names import with_markers
from pytest_gpuenv.rtc.source import HIPRTC_INCLUDE, SHIPPED_INCLUDE, Source

DEFAULT_ARCHS = ("gfx90a", "gfx942", "gfx1030", "gfx1100", "sm_80", "sm_90")
#: seconds a compiler's ``--version`` or ``--list-gpu-code`` may take, and a whole compile
TOOL_TIMEOUT = 60.0
COMPILE_TIMEOUT = 600.0
#: gfx90a, gfx942:sramecc+:xnack-, the generic targets (gfx9-generic, gfx9-4-generic, gfx11-generic), sm_90a
_ARCH = re.compile(r"^(gfx(?:[0-9a-f]{3,4}|\d{1,2}(?:-\d)?-generic)(?::[a-z]+[+-])*|sm_\d{2,3}[a-z]?)$")
_PROBE_SOURCE = (
    '#include <hip/hip_runtime.h>\nextern "C" __global__ void gpuenv_probe(float* o) { o[threadIdx.x] = 1.0f; }\n'
)


def check_arch(arch: str) -> str:
    a = str(arch).strip().lower()
    if not _ARCH.match(a):
        raise KernelCompileError(f"unknown arch {arch!r}: expected an AMD target such as gfx90a, gfx942, gfx1100, gfx11-generic or "
                                 "an NVIDIA target such as sm_80, sm_90", arch=str(arch))
    return a


def vendor_of(arch: str) -> str:
    return "amd" if arch.startswith("gfx") else "nvidia"


class Compiler:
    name = "?"
    vendor = "?"
    #: what this compiler is, for "looked for ..." messages
    looked_for = ""

    def available(self) -> bool:
        raise NotImplementedError

    def identity(self) -> str:
        raise NotImplementedError

    def supports(self, arch: str, cache_dir: Optional[str] = None) -> bool:
        raise NotImplementedError

    def compile(self, src: Source, name: str, arch: str, options: Sequence[str], defines: dict[str, Any],
                include_dirs: Sequence[str]) -> bytes:
        raise NotImplementedError

    def compile_named(self, src: Source, name: str, arch: str, options: Sequence[str], defines: dict[str, Any],
                      include_dirs: Sequence[str], exprs: Sequence[str], extra: str) -> tuple[bytes, dict[str, str]]:
        """The code object of ``src`` with ``extra`` (name-expression markers, ``rtc.names``) appended, and the
        lowered name of each of ``exprs`` that the compiler gives ({} here: the symbol table tells)."""
        src, include_dirs = with_markers(src, extra, include_dirs)
        return self.compile(src, name, arch, options, defines, include_dirs), {}

    #: headers the compiler includes before the source (``-include``, ``--pre-include``; hiprtc: built in)
    pre_includes: tuple[str, ...] = ("hip/hip_runtime.h",)

    def _extra_includes(self) -> list[str]:
        return []

    def include_path(self, src: Source, include_dirs: Sequence[str]) -> list[str]:
        """The ``-I`` folders this compiler is given, in order: the source's own, the caller's, its own."""
        return ([src.dir] if src.dir else []) + list(include_dirs) + self._extra_includes()

    def _flags(self, src: Source, defines: dict[str, Any], include_dirs: Sequence[str]) -> list[str]:
        flags = [f"-I{d}" for d in self.include_path(src, include_dirs)]
        for k, v in defines.items():
            flags.append(f"-D{k}" if v is None or v is True else f"-D{k}={v}")
        return flags

    def _run(self, cmd: list[str], src: Source, name: str, arch: str, output: str, env: Optional[dict[str, Any]]) -> bytes:
        """A compiler driver: ``cmd <source> -o <output>``, the source written to a temporary file if it has none."""
        with tempfile.TemporaryDirectory(prefix=f"gpuenv-{self.name}-") as tmp:
            path = src.path or os.path.join(tmp, "source.hip")
            if not src.path:
                with open(path, "w") as f:
                    f.write(src.text)
            out = os.path.join(tmp, output)
            p = run_tool(cmd + [path, "-o", out], COMPILE_TIMEOUT, env=env, compiler=self.name)
            if p.returncode != 0 or not os.path.isfile(out):
                log = (p.stderr + p.stdout).replace(path, src.display)
                raise compile_error(log, src, name, arch, self.name, f"{self.name} exited with status {p.returncode}")
            with open(out, "rb") as f:
                return f.read()

    def __repr__(self) -> str:
        return f"<{self.name} compiler>"


class _ProbedArchs(Compiler):
    """hiprtc/hipcc: which arches build, found by compiling a tiny kernel once per arch, kept on disk."""

    def _probe_one(self, arch: str) -> bool:
        src = Source(text=_PROBE_SOURCE, path=None, display="<probe>.hip")
        try:
            self.compile(src, "gpuenv_probe", arch, (), {}, ())
            return True
        except KernelCompileError:
            return False

    @cache  # noqa: B019
    def _probed(self, arch: str, cache_dir: Optional[str]) -> bool:
        """Whether ``arch`` builds: probed once, the answer kept in the compile cache (one probe per key
        under many processes, as for kernels)."""
        from pytest_gpuenv.rtc import cache as _cache

        key = hashlib.sha256(f"arch-probe\0{self.identity()}\0{arch}\0{_PROBE_SOURCE}".encode()).hexdigest()
        meta, _, _ = _cache.shared(cache_dir).get_or_compile(key, lambda: ({"ok": self._probe_one(arch)}, b""))
        return meta.get("ok") is True

    def supported_archs(self, archs: Sequence[str], cache_dir: Optional[str]) -> list[str]:
        self.identity()  # once, before the threads
        with ThreadPoolExecutor(max_workers=max(1, min(8, len(archs)))) as ex:
            ok = list(ex.map(lambda a: self._probed(a, cache_dir), archs))
        return [a for a, yes in zip(archs, ok) if yes]

    def supports(self, arch: str, cache_dir: Optional[str] = None) -> bool:
        return bool(self.supported_archs([arch], cache_dir))


class Hiprtc(_ProbedArchs):
    name = "hiprtc"
    vendor = "amd"
    looked_for = "hiprtc (libhiprtc.so, libamdhip64.so)"
    pre_includes = ()  # its device runtime is built in; the shipped stand-in is reached by #include only

    @cache  # noqa: B019 - one instance per process
    def library(self) -> Optional[str]:
        return discovery.hiprtc_library(Fs(None), os.environ)

    def available(self) -> bool:
        return self.library() is not None

    @cache  # noqa: B019
    def identity(self) -> str:
        return f"hiprtc:{file_id(self.library() or '')}"

    def _extra_includes(self) -> list[str]:
        return [HIPRTC_INCLUDE]

    def compile(self, src: Source, name: str, arch: str, options: Sequence[str], defines: dict[str, Any],
                include_dirs: Sequence[str]) -> bytes:
        return self.compile_named(src, name, arch, options, defines, include_dirs, (), "")[0]

    def compile_named(self, src: Source, name: str, arch: str, options: Sequence[str], defines: dict[str, Any],
                      include_dirs: Sequence[str], exprs: Sequence[str], extra: str) -> tuple[bytes, dict[str, str]]:
        opts = [f"--offload-arch={arch}", "-O3", "-std=c++17"]
        opts += self._flags(src, defines, include_dirs) + list(options)
        req = json.dumps({"source": src.text + extra, "name": src.display, "options": opts, "names": list(exprs)})
        worker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_hiprtc_worker.py")
        env = dict(os.environ)
        env.setdefault("HIP_VISIBLE_DEVICES", "")  # compile only: keep the child away from the GPUs
        p = run_tool([sys.executable, worker, self.library() or ""], COMPILE_TIMEOUT, input=req, env=env,
                     compiler=self.name)
        if p.returncode != 0 or not p.stdout.strip():
            how = (f"signal {signal.Signals(-p.returncode).name}" if p.returncode < 0
                   else f"exit status {p.returncode}")
            raise KernelCompileError(
                f"hiprtc crashed ({how}) compiling kernel {name!r} from {src.display} for {arch}: this hiprtc "
                f"({self.library()}) most likely does not know arch {arch!r}",
                log=p.stderr, file=src.path, arch=arch, compiler="hiprtc",
            )
        out = json.loads(p.stdout)
        if out["result"] != 0:
            raise compile_error(out["log"] or out["error"], src, name, arch, "hiprtc", out["error"])
        return base64.b64decode(out["code"]), dict(out.get("lowered") or {})


class Hipcc(_ProbedArchs):
    name = "hipcc"
    vendor = "amd"
    looked_for = "hipcc"

    @cache  # noqa: B019
    def path(self) -> Optional[str]:
        fs = Fs(None)
        return discovery.find_tool(fs, "hipcc", os.environ, discovery.rocm_homes(fs, os.environ))

    def available(self) -> bool:
        return self.path() is not None

    def _env(self) -> dict[str, Any]:
        env = dict(os.environ)
        env["HIP_PLATFORM"] = "amd"  # Debian's hipcc picks nvcc when it sees one
        return env

    @cache  # noqa: B019
    def identity(self) -> str:
        p = run_tool([self.path() or "hipcc", "--version"], TOOL_TIMEOUT, env=self._env(), compiler=self.name)
        return f"hipcc:{file_id(self.path() or '')}:{hashlib.sha256(p.stdout.encode()).hexdigest()[:16]}"

    def compile(self, src: Source, name: str, arch: str, options: Sequence[str], defines: dict[str, Any],
                include_dirs: Sequence[str]) -> bytes:
        cmd = [self.path() or "hipcc", "--genco", f"--offload-arch={arch}", "-O3", "-std=c++17", "-x", "hip",
               "-include", "hip/hip_runtime.h"]  # as hiprtc does
        cmd += self._flags(src, defines, include_dirs) + list(options)
        return self._run(cmd, src, name, arch, "kernel.co", self._env())


class Nvrtc(Compiler):
    name = "nvrtc"
    vendor = "nvidia"
    looked_for = "NVRTC (cuda.bindings.nvrtc)"

    @cache  # noqa: B019
    def _module(self) -> Any:
        try:
            from cuda.bindings import nvrtc
        except Exception:
            try:
                from cuda import nvrtc  # cuda-python < 12.6
            except Exception:
                return None
        try:
            return nvrtc if int(nvrtc.nvrtcVersion()[0]) == 0 else None
        except Exception:  # libnvrtc.so not found
            return None

    def available(self) -> bool:
        return self._module() is not None

    @cache  # noqa: B019
    def identity(self) -> str:
        nvrtc = self._module()
        _, major, minor = nvrtc.nvrtcVersion()
        try:
            from cuda.bindings import __version__ as bver
        except Exception:
            bver = "?"
        return f"nvrtc:{major}.{minor}:cuda-bindings-{bver}"

    def _extra_includes(self) -> list[str]:
        return [SHIPPED_INCLUDE, *_cuda_includes(os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"))]

    @cache  # noqa: B019
    def _archs(self) -> tuple[int, ...]:
        nvrtc = self._module()
        try:
            err, archs = nvrtc.nvrtcGetSupportedArchs()
            return tuple(archs)
        except Exception:
            return ()

    def supports(self, arch: str, cache_dir: Optional[str] = None) -> bool:
        m = re.match(r"^sm_(\d+)", arch)
        return m is not None and int(m.group(1)) in self._archs()

    def compile(self, src: Source, name: str, arch: str, options: Sequence[str], defines: dict[str, Any],
                include_dirs: Sequence[str]) -> bytes:
        return self.compile_named(src, name, arch, options, defines, include_dirs, (), "")[0]

    def compile_named(self, src: Source, name: str, arch: str, options: Sequence[str], defines: dict[str, Any],
                      include_dirs: Sequence[str], exprs: Sequence[str], extra: str) -> tuple[bytes, dict[str, str]]:
        nvrtc = self._module()
        if not self.supports(arch):
            have = ", ".join(f"sm_{a}" for a in self._archs())
            raise KernelCompileError(f"NVRTC does not know arch {arch!r} (it supports {have})", arch=arch,
                                     compiler="nvrtc", file=src.path)
        opts = [f"--gpu-architecture={arch}", "-default-device", "-std=c++17", "--pre-include=hip/hip_runtime.h"]
        opts += self._flags(src, defines, include_dirs) + list(options)
        err, prog = nvrtc.nvrtcCreateProgram(src.data + extra.encode(), src.display.encode(), 0, [], [])
        try:
            for e in exprs:
                nvrtc.nvrtcAddNameExpression(prog, e.encode())
            (res,) = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
            _, n = nvrtc.nvrtcGetProgramLogSize(prog)
            # NVRTC writes into the buffer: it must be a bytearray. ``b" " * n`` (cuda-python's examples)
            # is, for an empty log (n == 1), CPython's shared one-byte object b" ", and overwriting it
            # turned every later " " constant compiled in the process into "\0".
            buf = bytearray(n)
            nvrtc.nvrtcGetProgramLog(prog, buf)
            log = bytes(buf).rstrip(b"\0").decode("utf-8", "replace")
            if int(res) != 0:
                raise compile_error(log, src, name, arch, "nvrtc", str(res.name if hasattr(res, "name") else res))
            _, n = nvrtc.nvrtcGetCUBINSize(prog)
            cubin = bytearray(n)
            nvrtc.nvrtcGetCUBIN(prog, cubin)
            lowered = {e: nvrtc.nvrtcGetLoweredName(prog, e.encode()) for e in exprs}
            return bytes(cubin), {e: r[1].decode() for e, r in lowered.items() if int(r[0]) == 0 and r[1]}
        finally:
            nvrtc.nvrtcDestroyProgram(prog)


class Nvcc(Compiler):
    name = "nvcc"
    vendor = "nvidia"
    looked_for = "nvcc"

    @cache  # noqa: B019
    def path(self) -> Optional[str]:
        fs = Fs(None)
        return discovery.find_tool(fs, "nvcc", os.environ, discovery.cuda_homes(fs, os.environ))

    def available(self) -> bool:
        return self.path() is not None

    @cache  # noqa: B019
    def identity(self) -> str:
        p = run_tool([self.path() or "nvcc", "--version"], TOOL_TIMEOUT, compiler=self.name)
        return f"nvcc:{file_id(self.path() or '')}:{hashlib.sha256(p.stdout.encode()).hexdigest()[:16]}"

    def _extra_includes(self) -> list[str]:
        return [SHIPPED_INCLUDE]

    @cache  # noqa: B019
    def _archs(self) -> tuple[str, ...]:
        p = run_tool([self.path() or "nvcc", "--list-gpu-code"], TOOL_TIMEOUT, compiler=self.name)
        return tuple(line.strip() for line in p.stdout.split() if line.strip().startswith("sm_"))

    def supports(self, arch: str, cache_dir: Optional[str] = None) -> bool:
        return re.sub(r"[a-z]$", "", arch) in self._archs()

    def compile(self, src: Source, name: str, arch: str, options: Sequence[str], defines: dict[str, Any],
                include_dirs: Sequence[str]) -> bytes:
        if not self.supports(arch):
            raise KernelCompileError(f"nvcc does not know arch {arch!r} (it supports {', '.join(self._archs())})",
                                     arch=arch, compiler="nvcc", file=src.path)
        cmd = [self.path() or "nvcc", "-cubin", f"-arch={arch}", "-O3", "-std=c++17", "-x", "cu",
               "-include", "hip/hip_runtime.h"]
        cmd += self._flags(src, defines, include_dirs) + list(options)
        return self._run(cmd, src, name, arch, "kernel.cubin", None)


_ALL: dict[str, Compiler] = {"hiprtc": Hiprtc(), "hipcc": Hipcc(), "nvrtc": Nvrtc(), "nvcc": Nvcc()}
_ORDER = {"amd": ("hiprtc", "hipcc"), "nvidia": ("nvrtc", "nvcc")}


def get(name: str) -> Compiler:
    if name not in _ALL:
        raise ValueError(f"unknown compiler {name!r}; expected one of: {', '.join(_ALL)}")
    return _ALL[name]


def for_arch(arch: str, compiler: Optional[str] = None) -> Compiler:
    """The first installed compiler for ``arch`` (or the named one); KernelCompileError if none."""
    vendor = vendor_of(arch)
    if compiler is not None:
        c = get(compiler)
        if c.vendor != vendor:
            raise KernelCompileError(f"{c.name} cannot compile for {arch}", arch=arch, compiler=c.name)
        if not c.available():
            raise KernelCompileError(f"{c.name} is not installed (needed for {arch})", arch=arch, compiler=c.name)
        return c
    for n in _ORDER[vendor]:
        if _ALL[n].available():
            return _ALL[n]
    looked = ", ".join(_ALL[n].looked_for for n in _ORDER[vendor])
    raise KernelCompileError(f"no compiler for {arch}: looked for {looked}", arch=arch)


#: the runtime compilers and the driver that takes what they cannot: host headers (``<stdlib.h>``, ``<chrono>``)
RTC_FALLBACK = {"hiprtc": "hipcc", "nvrtc": "nvcc"}


def host_header_error(exc: KernelCompileError, src: Source, include_dirs: Sequence[str]) -> Optional[str]:
    """The header a runtime compiler's error is in when that is no header of the kernel's own: a host header
    (``stdint-intn.h``, libstdc++'s ``type_traits``) that hiprtc or NVRTC cannot take where the compiler
    driver (``RTC_FALLBACK``) can; None when the error is in the kernel's file, its folder or ``include_dirs``,
    or when the compiler is no runtime compiler."""
    if exc.compiler not in RTC_FALLBACK or not exc.file:
        return None
    file = os.path.normpath(exc.file)
    if src.path and file == os.path.normpath(src.path) or file == src.display or file.startswith("<"):
        return None
    own = [d for d in [src.dir, *include_dirs] if d]
    if any(file.startswith(os.path.join(os.path.abspath(d), "")) for d in own):
        return None
    return exc.file


def looked_for() -> str:
    return ", ".join(c.looked_for for c in _ALL.values())


def default_archs(cache_dir: Optional[str]) -> list[str]:
    """DEFAULT_ARCHS restricted to what the installed compilers build (hip arches probed once, cached)."""
    out = []
    for vendor in ("amd", "nvidia"):
        archs = [a for a in DEFAULT_ARCHS if vendor_of(a) == vendor]
        try:
            c = for_arch(archs[0])
        except KernelCompileError:
            continue
        if isinstance(c, _ProbedArchs):
            out += c.supported_archs(archs, cache_dir)
        else:
            out += [a for a in archs if c.supports(a)]
    return [a for a in DEFAULT_ARCHS if a in out]


@cache
def _cuda_includes(*homes: Optional[str]) -> tuple[str, ...]:
    """cuda_fp16.h's folders, found once per process for each $CUDA_HOME, $CUDA_PATH (a tenth of a warm hit)."""
    return tuple(discovery.cuda_include_dirs(Fs(None), dict(zip(("CUDA_HOME", "CUDA_PATH"), homes))))
