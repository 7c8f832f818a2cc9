"""``gpuenv compile FILE [--arch LIST] [--kernel NAME]``: compile-check a HIP source for CI scripts."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Optional, Sequence


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gpuenv compile",
        description="Compile a HIP source for each arch; print size and time, or the compiler's log.",
    )
    p.add_argument("file", help="the .hip source (or CUDA: .cu, .cuh)")
    p.add_argument("--arch", help="comma-separated targets, e.g. gfx90a,gfx1030,sm_90, or cpu (the CPU "
                   "executor, built by the host C++ compiler) (default: what the installed compilers support "
                   "of gfx90a, gfx942, gfx1030, gfx1100, sm_80, sm_90)")
    p.add_argument("--kernel", action="append", help="kernel name (repeatable; default: every extern \"C\" "
                   "__global__ kernel in the file)")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME[=VALUE]", help="define a macro")
    p.add_argument("-I", dest="include_dirs", action="append", default=[], metavar="DIR", help="include directory")
    p.add_argument("--compiler", choices=("hiprtc", "hipcc", "nvrtc", "nvcc"), help="force a compiler")
    p.add_argument("--cache-dir", help="compile cache directory (default: the per-user cache)")
    p.add_argument("--no-cache", action="store_true", help="always compile (still prints the time)")
    return p


def compile_command(argv: Optional[Sequence[str]] = None, out=None) -> int:  # type: ignore[no-untyped-def]
    """Run ``gpuenv compile``; returns the exit status (0: every kernel built for every arch)."""
    from pytest_gpuenv.rtc import compilers as _compilers
    from pytest_gpuenv.rtc.errors import CacheDirError, KernelCompileError
    from pytest_gpuenv.rtc.kernel import compile_kernel, get_cache
    from pytest_gpuenv.rtc.logs import LogOnce
    from pytest_gpuenv.rtc.source import load_source

    out = out or sys.stdout
    err = sys.stderr if out is sys.stdout else out
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        src = load_source(args.file).searching(args.include_dirs)
        names = args.kernel or [k.name for k in src.kernels.values() if k.extern_c]
        if not names:
            print(f"gpuenv compile: no extern \"C\" __global__ kernel in {src.path}; name the kernels with --kernel NAME",
                  file=err)
            return 2
        if args.arch:
            archs = [a.strip() for a in args.arch.split(",") if a.strip()]
        else:
            archs = _compilers.default_archs(get_cache(args.cache_dir).path)
            if not archs:
                print(f"gpuenv compile: no HIP compiler found (looked for {_compilers.looked_for()})", file=err)
                return 2
    except (KernelCompileError, CacheDirError) as exc:
        print(f"gpuenv compile: {exc}", file=err)
        return 2
    defines = {}
    for d in args.defines:
        k, _, v = d.partition("=")
        defines[k] = v or None
    failed = 0
    logs = LogOnce()  # a source with several kernels fails each of them with the same log: print it once
    for name in names:
        for arch in archs:
            t = time.perf_counter()
            try:
                k = compile_kernel(src, name, arch=arch, defines=defines,
                                   include_dirs=args.include_dirs, compiler=args.compiler, cache_dir=args.cache_dir,
                                   use_cache=not args.no_cache)
            except (KernelCompileError, CacheDirError) as exc:
                failed += 1
                text = logs.text(exc, f"above, under {name} {arch}") if isinstance(exc, KernelCompileError) else exc
                print(f"FAIL {name} {arch}: {text}", file=out)
                continue
            took = time.perf_counter() - t
            how = f"cached, built in {k.compile_seconds:.2f} s" if k.cache_hit else f"{took:.2f} s"
            print(f"ok   {name} {arch:<8} {k.compiler:<6} {k.size:>8} bytes  {how}", file=out)
    return 1 if failed else 0
