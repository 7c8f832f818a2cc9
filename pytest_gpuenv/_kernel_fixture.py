"""What the ``hip_kernel`` fixture (defined in fixtures.py) does: compile for the GPU the test runs
on, or compile-check every target. Imported when a test first asks for ``hip_kernel``.

On a GPU: the kernel is built for the device's arch and launched there; each launch waits for the
kernel (``sync=True``, pass ``sync=False`` to time launches), so a fault fails the test that caused it.
On a CPU-only runner: the kernel is built for each arch of ``gpuenv_compile_archs`` that an installed
compiler supports, then the test skips ("compiled for gfx90a, sm_90; no GPU to launch on"). A compile
error fails the test either way, with the compiler's log pointing at the file and line.
With ``--gpuenv-kernels=run`` (the default where a C++ compiler exists) a CPU-only runner instead
runs the kernel on the CPU executor (``arch="cpu"``, checked) at the test's warp size
(``request.param``, from ``fixtures.parametrize_hip_kernel``); ``gpuenv_compile_archs``, when set,
is still compile-checked first, and when it is not, the kernel is compile-checked for one GPU arch that
hiprtc or NVRTC knows here (``_check_arch``: host-only code such as ``std::vector`` fails there rather than
inside the CPU executor). ``off`` skips. An arch the installed compiler does not know (probed once, cached)
is not compile-checked: the skip names it (``compile``), or a warning once per run (``run``).
A relative kernel path is looked up beside the test file and in its ``kernels/``, then in each parent's up to
the rootdir (``gpuenv_kernel_dirs``, when set, first).

A kernel that faults (an illegal address) leaves the process's CUDA context unusable. The fixture
runs its test inside ``pytest_gpuenv.runtime.running(nodeid)``, so the runtime records which test
did it; the failing test reports the runtime's error, and every later ``hip_kernel`` call in that
process skips, naming that test (``runtime.poisoned()``; skip rather than fail: the fault is already
one failure, and the later tests did not run). Tests that may fault belong in a subprocess.

A compile error shows the compiler's log of each failing arch, once per run: a later test that meets the
same log (the same kernel and arch) gives the error's first line and the test whose failure shows it.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable, Optional

import pytest

from pytest_gpuenv._options import Settings, defaults
from pytest_gpuenv._outputs import mark_compile_only
from pytest_gpuenv._session import get_session
from pytest_gpuenv.detect import detect
from pytest_gpuenv.model import Device, GpuEnv
from pytest_gpuenv.rtc import _compilers
from pytest_gpuenv.rtc._attribute import LogOnce
from pytest_gpuenv.rtc._errors import CacheDirError, KernelCompileError
from pytest_gpuenv.rtc._names import targets
from pytest_gpuenv.rtc._source import load_source
from pytest_gpuenv.rtc.kernel import compile_kernel, get_cache
from pytest_gpuenv.rtc.module import compile_module
from pytest_gpuenv.runtime import poisoned

__all__ = ["HipKernelFactory"]

_LOGS: pytest.StashKey[LogOnce] = pytest.StashKey()
#: (arch, compiler) pairs a run-mode warning already named as not compile-checked
_UNKNOWN: pytest.StashKey[set[tuple[str, str]]] = pytest.StashKey()
_UNKNOWN_TAIL = "; not compile-checked)"


def _env_and_settings(config: pytest.Config) -> tuple[GpuEnv, Settings]:
    try:
        session = get_session(config)
    except KeyError:  # the plugin is not configured (-p no:gpuenv with the fixture imported)
        return detect(), defaults(config)
    return session.env, session.settings


def _compile(path_or_source: Any, name: Optional[str], names: Optional[list], **kw: Any) -> Any:
    """A Kernel for ``name``, or with ``names`` a Module of those kernels (``name`` first when given)."""
    if names is None:
        return compile_kernel(path_or_source, name, **kw)  # type: ignore[arg-type]
    return compile_module(path_or_source, ([name] if name and name not in names else []) + list(names), **kw)


class HipKernelFactory:
    """``hip_kernel(path_or_source, name, **options)`` -> a compiled, launchable Kernel;
    ``hip_kernel(path_or_source, names=[...])`` -> a Module of those kernels (``kernel(name)``, ``get_global``)."""

    def __init__(self, request: pytest.FixtureRequest,
                 find_device: Callable[[pytest.FixtureRequest, GpuEnv], Optional[Device]]) -> None:
        """``find_device(request, env)``: the GPU this test runs on (the fixture's ``current_device``)."""
        self.request, self.find_device = request, find_device
        self.env, self.settings = _env_and_settings(request.config)

    def _kernel_dirs(self) -> list[str]:
        """Where a relative kernel path is looked up: the test file's folder and its ``kernels/``, then each
        parent's up to the rootdir, so the lookup does not depend on where pytest was started; the ini's
        ``gpuenv_kernel_dirs``, when set, come first (the default, the rootdir's ``kernels/``, comes last)."""
        config = self.request.config
        root = config.rootpath
        default = [str(root / "kernels")]
        path = getattr(self.request.node, "path", None)
        here = []
        if path is not None:
            folder = path.parent
            chain = [folder, *folder.parents]
            if root in chain:
                chain = chain[:chain.index(root) + 1]
            else:
                chain = [folder]
            here = [str(p) for d in chain for p in (d, d / "kernels")]
        configured = [] if self.settings.kernel_dirs == default else list(self.settings.kernel_dirs)
        return list(dict.fromkeys(configured + here + default))

    def _device(self) -> Optional[Device]:
        return self.find_device(self.request, self.env) if self.env.has_gpu else None

    def __call__(self, path_or_source: Any, name: Optional[str] = None, **options: Any) -> Any:
        poison = poisoned()
        if poison is not None:
            pytest.skip(poison.reason())
        kw = dict(
            options=options.pop("options", ()),
            defines=options.pop("defines", None),
            include_dirs=options.pop("include_dirs", ()),
            compiler=options.pop("compiler", None),
            dialect=options.pop("dialect", None),  # "cuda" for CUDA source text; a .cu/.cuh file is CUDA anyway
            kernel_dirs=self._kernel_dirs(),
            cache_dir=self.settings.cache_dir,
        )
        arch = options.pop("arch", None)
        sync = options.pop("sync", True)
        names = options.pop("names", None)
        lockstep = bool(options.pop("lockstep", False))  # CPU executor only: a GPU runs as it runs
        if options:
            raise TypeError(
                f"hip_kernel() got unexpected options {sorted(options)}; expected arch, options, defines, "
                "include_dirs, compiler, dialect, sync, names, lockstep"
            )
        if names is not None and (isinstance(names, str) or not names):
            raise TypeError(f"hip_kernel(names=...) takes a non-empty list of kernel names, got {names!r}")
        if name is None and names is None:
            raise TypeError("hip_kernel() needs a kernel name, or names=[...] for a module")
        kw["names"] = list(names) if names is not None else None
        dev = self._device()
        try:
            warp = getattr(self.request, "param", None)
            if dev is None and isinstance(warp, int):
                if self.settings.compile_archs:
                    self._compile_archs(path_or_source, name, None, kw, need_one=False)  # then it runs here
                else:
                    self._gpu_compile_check(path_or_source, name, kw)
                return _compile(path_or_source, name, arch="cpu", warp_size=warp, check=True, lockstep=lockstep,
                                **kw)
            if dev is None and self.settings.kernels == "off":
                pytest.skip(f"hip_kernel: --gpuenv-kernels=off and no GPU ({self.env.describe()})")
            if dev is not None:
                arch = arch or (dev.arch or "").split(":")[0] or None
                if arch is None:
                    pytest.fail(f"hip_kernel: the arch of {dev.describe()} is unknown; pass arch=", pytrace=False)
                return _compile(path_or_source, name, arch=arch, device=dev.index, sync=sync, **kw)
            return self._compile_check(path_or_source, name, arch, kw)
        except KernelCompileError as exc:
            message = f"hip_kernel: {self._log_text(exc)}"
        except CacheDirError as exc:
            message = f"hip_kernel: {exc}"
        pytest.fail(message, pytrace=False)

    def _log_text(self, exc: KernelCompileError) -> str:
        """``exc`` with its log, or, when an earlier test showed that log, where."""
        logs = self.request.config.stash.setdefault(_LOGS, LogOnce())
        return logs.text(exc, f"in the failure of {self.request.node.nodeid}")  # outside the except: no "During handling ..." chain

    def _compile_check(self, path_or_source: Any, name: Optional[str], arch: Optional[str], kw: dict) -> Any:
        built, missing = self._compile_archs(path_or_source, name, arch, kw)
        absent = [m.split(" ")[0] for m in missing if not m.endswith(_UNKNOWN_TAIL)]
        extra = f"; no compiler for {', '.join(absent)}" if absent else ""
        extra += "".join(f"; {m}" for m in missing if m.endswith(_UNKNOWN_TAIL))
        why = ""
        if self.settings.kernels == "run" and not self.env.compilers.get("cxx"):
            why = "; no C++ compiler to run it on the CPU executor (install g++)"
        mark_compile_only(self.request.node, built)  # the --gpuenv-json report lists compile-only tests
        pytest.skip(f"compiled for {', '.join(built)}{extra}; no GPU to launch on{why}")

    def _compile_archs(self, path_or_source: Any, name: Optional[str], arch: Optional[str], kw: dict,
                       need_one: bool = True) -> tuple[list[str], list[str]]:
        """Compile for every target; fails the test on a compile error, skips when nothing can build (unless
        ``need_one`` is False: the kernel then runs on the CPU executor all the same)."""
        if arch is not None:
            archs = [arch]
        elif self.settings.compile_archs:
            archs = list(self.settings.compile_archs)
        else:
            archs = _compilers.default_archs(get_cache(kw["cache_dir"]).path)
        if not archs:
            pytest.skip(
                f"hip_kernel requires a GPU or a HIP compiler: found {self.env.describe()}, and none of "
                f"{_compilers.looked_for()}"
            )
        targets(load_source(path_or_source, kw["kernel_dirs"]), ([name] if name else []) + list(kw["names"] or []))
        # ^ a missing kernel fails once, not per arch
        built, missing, errors = [], [], []
        cache_path = get_cache(kw["cache_dir"]).path
        for a in archs:
            try:
                c = _compilers.for_arch(_compilers.check_arch(a), kw["compiler"])
            except KernelCompileError as exc:
                if exc.arch == a and "unknown arch" not in str(exc):
                    missing.append(f"{a} ({exc})")
                    continue
                raise
            if not c.supports(a, cache_path):  # probed once per compiler and arch, the answer cached
                missing.append(self._unknown_arch(a, c))
                continue
            try:
                _compile(path_or_source, name, arch=a, **kw)
                built.append(a)
            except KernelCompileError as exc:
                errors.append((a, exc))
        if errors:
            shown = "\n".join(self._log_text(exc) for _, exc in errors)  # each arch's log: compilers differ
            more = f"\n(also failed for {', '.join(a for a, _ in errors[1:])})" if len(errors) > 1 else ""
            ok = f"; built for {', '.join(built)}" if built else ""
            pytest.fail(f"hip_kernel: {shown}{more}{ok}", pytrace=False)
        if not built and need_one:
            absent = [m for m in missing if not m.endswith(_UNKNOWN_TAIL)]
            unknown = [m for m in missing if m.endswith(_UNKNOWN_TAIL)]
            why = ([f"no compiler for {', '.join(absent)}"] if absent else []) + unknown
            pytest.skip(f"hip_kernel requires a GPU or a HIP compiler: found {self.env.describe()}; {'; '.join(why)}")
        return built, missing

    def _unknown_arch(self, arch: str, compiler: _compilers.Compiler) -> str:
        """The skip-with-reason of compiling for an arch the installed compiler does not know (Debian 12's
        ROCm 5.2 hiprtc and gfx942: it aborts): in ``compile`` mode the skip names it; in ``run`` mode,
        where the test runs on the CPU executor, a warning says so once per arch and compiler."""
        where = getattr(compiler, "library", getattr(compiler, "path", lambda: None))()
        text = f"{arch} ({compiler.name}{f' {where}' if where else ''} does not know it{_UNKNOWN_TAIL}"
        warned = self.request.config.stash.setdefault(_UNKNOWN, set())
        if self.settings.kernels == "run" and (arch, compiler.name) not in warned:
            warned.add((arch, compiler.name))
            warnings.warn(UserWarning(f"hip_kernel: {text}"), stacklevel=4)
        return text

    def _gpu_compile_check(self, path_or_source: Any, name: Optional[str], kw: dict) -> None:
        """``run`` mode: before the kernel runs on the CPU executor (built by the host C++ compiler, which
        accepts host-only code such as ``std::vector``), compile it for one GPU arch that hiprtc or NVRTC
        knows here; a compile error there is the test's error. Cached like any kernel build."""
        arch = _check_arch(kw["compiler"], get_cache(kw["cache_dir"]).path)
        if arch is None:
            return
        try:
            _compile(path_or_source, name, arch=arch, **kw)
            return
        except KernelCompileError as exc:
            error = exc
        pytest.fail(f"hip_kernel: compile check for {arch} (the kernel would run on the CPU executor, whose host "
                    f"compiler accepts code no GPU compiler does): {self._log_text(error)}", pytrace=False)


@functools.cache
def _check_arch(compiler: Optional[str], cache_dir: str) -> Optional[str]:
    """The GPU arch ``run`` mode compile-checks kernels for: the first of the default targets that hiprtc,
    else NVRTC, builds here (gfx90a with Debian 12's ROCm 5.2 hiprtc), or None without either (or with
    another compiler forced)."""
    for cname in ("hiprtc", "nvrtc"):
        c = _compilers.get(cname)
        if (compiler is not None and compiler != cname) or not c.available():
            continue
        for a in _compilers.DEFAULT_ARCHS:
            if _compilers.vendor_of(a) == c.vendor and c.supports(a, cache_dir):
                return a
    return None

