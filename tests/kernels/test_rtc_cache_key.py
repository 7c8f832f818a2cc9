"""The compile cache's key covers every header the compiler can reach, and computing it never hangs.

Each test reproduces the attack for real: headers changed after the first compile (also through a real
compiler where one is installed), a FIFO or a link to /dev/zero planted as a header.
"""

from __future__ import annotations

import sys

import pytest
from _cache_hostile import PLANTS, child, stub_key

from pytest_gpuenv.rtc import compilers
from pytest_gpuenv.rtc.source import load_source

pytestmark = pytest.mark.usefixtures("fresh_compile_cache")


#: case: (the include in k/k.hip, the header then changed, options); include_dirs inc/, inc2/; the compiler's own/
HEADER_CASES = {
    "angled-in-source-dir": ("#include <cfg.h>", "k/cfg.h", []),  # the attack: -I<source dir>
    "quoted-next-to-header": ("#include <sub/a.h>", "inc/sub/b.h", []),
    "option-I": ("#include <o.h>", "opt/o.h", ["-I", "{tmp}/opt"]),
    "option-I-joined": ("#include <o.h>", "opt/o.h", ["-I{tmp}/opt"]),
    "option-include": ("", "pre.h", ["-include", "{tmp}/pre.h"]),
    "shadowed-later-dir": ("#include <s.h>", "inc2/s.h", []),  # whichever the compiler takes
    "include-next": ("#include <n.h>", "inc2/n.h", []),
    "compiler-own-dir": ("", "own/hip/hip_runtime.h", []),  # its pre-include
    "inline-source-cwd": ('#include "cw.h"', "cw.h", []),
}


@pytest.mark.parametrize("case", list(HEADER_CASES))
def test_header_change_changes_the_key(tmp_path, monkeypatch, case):
    include, changed, options = HEADER_CASES[case]
    files = {"inc/sub/a.h": '#include "b.h"\n', "inc/s.h": "#define V 1\n", "inc/n.h": "#include_next <n.h>\n",
             changed: "#define V 1\n", "k/k.hip": include + '\nextern "C" __global__ void k(float* o) { o[0] = V; }\n'}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    options = [o.format(tmp=tmp_path) for o in options]
    monkeypatch.chdir(tmp_path)
    src = load_source(files["k/k.hip"] if case == "inline-source-cwd" else str(tmp_path / "k" / "k.hip"))
    dirs = [str(tmp_path / "inc"), str(tmp_path / "inc2")]
    before = stub_key(src, options, dirs, str(tmp_path / "own"))
    assert stub_key(src, options, dirs, str(tmp_path / "own")) == before
    (tmp_path / changed).write_text("#define V 2\n")
    assert stub_key(src, options, dirs, str(tmp_path / "own")) != before


def test_stale_kernel_attack_with_a_real_compiler(tmp_path):
    """The attack as filed: <scale.h> next to the kernel, changed after the first compile."""
    from pytest_gpuenv.rtc import compile_kernel

    pairs = (("nvrtc", "sm_90"), ("hiprtc", "gfx90a"), ("nvcc", "sm_90"), ("hipcc", "gfx90a"))
    arch = next((a for n, a in pairs if compilers.get(n).available() and compilers.get(n).supports(a)), None)
    if arch is None:
        pytest.skip(f"requires a HIP compiler: looked for {compilers.looked_for()}")
    (tmp_path / "scale.h").write_text("#define SCALE 2.0f\n")
    (tmp_path / "k.hip").write_text('#include <scale.h>\nextern "C" __global__ void k(float* o) { o[0] *= SCALE; }\n')
    cache = str(tmp_path / "cache")
    first = compile_kernel(str(tmp_path / "k.hip"), "k", arch=arch, cache_dir=cache)
    assert compile_kernel(str(tmp_path / "k.hip"), "k", arch=arch, cache_dir=cache).cache_hit
    (tmp_path / "scale.h").write_text("#define SCALE 3.0f\n")
    again = compile_kernel(str(tmp_path / "k.hip"), "k", arch=arch, cache_dir=cache)
    assert not again.cache_hit and again.binary != first.binary


@pytest.mark.skipif(sys.platform != "linux", reason="FIFOs and /dev/zero")
@pytest.mark.parametrize("kind", ["fifo", "dev-zero-link"])
def test_planted_header_does_not_hang_the_key(tmp_path, monkeypatch, kind):
    PLANTS[kind](str(tmp_path / "h.h"))
    (tmp_path / "k.hip").write_text('#include "h.h"\nextern "C" __global__ void k(int n) {}\n')
    out = child(["-c", "from _cache_hostile import stub_key\nfrom pytest_gpuenv.rtc.source import load_source\n"
                 f"print(len(stub_key(load_source({str(tmp_path / 'k.hip')!r}), [], [], {str(tmp_path)!r})))"],
                limit_memory=True, timeout=60)
    assert out.stdout.strip() == "64", out.stderr  # a key, without blocking on the FIFO or reading /dev/zero


@pytest.mark.skipif(sys.platform != "linux", reason="FIFOs and /dev/zero")
@pytest.mark.parametrize("kind", ["fifo", "dev-zero-link"])
@pytest.mark.parametrize("directive", ['#include "h.h"', '#inc\\\nlude "h.h"', '#pragma GCC dependency "h.h"',
                                       '#define H "h.h"\n#include H'],
                         ids=["include", "spliced", "pragma-dependency", "macro"])
def test_a_planted_header_is_refused_before_the_compiler_starts(tmp_path, kind, directive):
    """The compiler opened a FIFO header and blocked until its 300 s limit: a header that is no regular file is a
    compile error naming it, raised before any compiler runs."""
    import time

    from pytest_gpuenv.rtc import KernelCompileError, compile_kernel

    PLANTS[kind](str(tmp_path / "h.h"))
    (tmp_path / "k.hip").write_text(directive + '\nextern "C" __global__ void k(int n) {}\n')
    t = time.monotonic()
    with pytest.raises(KernelCompileError, match=r"h\.h is not a regular file .*refused before the compiler"):
        compile_kernel(str(tmp_path / "k.hip"), "k", arch="cpu", cache_dir=str(tmp_path / "cache"))
    assert time.monotonic() - t < 60


def _arches() -> list[str]:
    """The CPU executor, and a GPU arch whose compiler is installed here (hiprtc with Debian's ROCm)."""
    pairs = (("hiprtc", "gfx90a"), ("nvrtc", "sm_90"), ("hipcc", "gfx90a"), ("nvcc", "sm_90"))
    gpu = next((a for n, a in pairs if compilers.get(n).available() and compilers.get(n).supports(a)), None)
    return ["cpu"] + ([gpu] if gpu else [])


PROBE = """#include <hip/hip_runtime.h>
#if __has_include("opt.h")
#define V 2
#else
#define V 1
#endif
extern "C" __global__ void k(int* o) { o[0] = V; }
"""


MACRO_PROBE = """#include <hip/hip_runtime.h>
#define HP "opt.h"
#if __has_include(HP)
#define V 2
#else
#define V 1
#endif
extern "C" __global__ void k(int* o) { o[0] = V; }
"""


@pytest.mark.parametrize("arch", _arches())
@pytest.mark.parametrize("source", [PROBE, MACRO_PROBE], ids=["literal", "macro"])
def test_a_header_probed_with_has_include_is_in_the_key(tmp_path, arch, source):
    """A header only probed (``__has_include``) was not in the key: after it appeared the old binary, built
    without it, was served. Its appearing, changing and going away each change the key."""
    from pytest_gpuenv.rtc import compile_kernel

    (tmp_path / "k.hip").write_text(source)
    cache = str(tmp_path / "cache")
    compile_kernel(str(tmp_path / "k.hip"), "k", arch=arch, cache_dir=cache)
    assert compile_kernel(str(tmp_path / "k.hip"), "k", arch=arch, cache_dir=cache).cache_hit
    (tmp_path / "opt.h").write_text("// present\n")
    assert not compile_kernel(str(tmp_path / "k.hip"), "k", arch=arch, cache_dir=cache).cache_hit
    (tmp_path / "opt.h").write_text("// present, changed\n")
    assert not compile_kernel(str(tmp_path / "k.hip"), "k", arch=arch, cache_dir=cache).cache_hit
    (tmp_path / "opt.h").unlink()
    assert compile_kernel(str(tmp_path / "k.hip"), "k", arch=arch, cache_dir=cache).cache_hit  # the first again


@pytest.mark.parametrize("var", ["CPLUS_INCLUDE_PATH", "CPATH"])
def test_a_header_found_through_the_include_path_variables_is_in_the_key(tmp_path, monkeypatch, var):
    """A header the compiler found through ``CPLUS_INCLUDE_PATH`` (or ``CPATH``) was not in the key: after it
    changed, the old binary was served and ``gpuenv compile`` said "cached"."""
    from pytest_gpuenv.rtc import compile_kernel

    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "scale.h").write_text("#define SCALE 2\n")
    (tmp_path / "k.hip").write_text('#include <hip/hip_runtime.h>\n#include <scale.h>\n'
                                    'extern "C" __global__ void k(int* o) { o[0] = SCALE; }\n')
    monkeypatch.setenv(var, str(inc))
    cache = str(tmp_path / "cache")
    first = compile_kernel(str(tmp_path / "k.hip"), "k", arch="cpu", cache_dir=cache)
    assert compile_kernel(str(tmp_path / "k.hip"), "k", arch="cpu", cache_dir=cache).cache_hit
    (inc / "scale.h").write_text("#define SCALE 3\n")
    again = compile_kernel(str(tmp_path / "k.hip"), "k", arch="cpu", cache_dir=cache)
    assert not again.cache_hit and again.binary != first.binary
    other = tmp_path / "other"
    other.mkdir()
    (other / "scale.h").write_text("#define SCALE 3\n")  # the same text under another path: another compile
    monkeypatch.setenv(var, str(other))
    assert not compile_kernel(str(tmp_path / "k.hip"), "k", arch="cpu", cache_dir=cache).cache_hit


def test_a_folder_named_like_a_header_is_passed_by_as_compilers_do(tmp_path):
    """g++ skips a folder on the include path that has a header's name (``memory/`` beside the kernel): only a
    FIFO or a device is refused."""
    from pytest_gpuenv.rtc import compile_kernel

    (tmp_path / "memory").mkdir()
    (tmp_path / "k.hip").write_text('#include <hip/hip_runtime.h>\n#include <memory>\n'
                                    'extern "C" __global__ void k(int* o) { o[0] = 1; }\n')
    compile_kernel(str(tmp_path / "k.hip"), "k", arch="cpu", cache_dir=str(tmp_path / "cache"), options=["-I."])
