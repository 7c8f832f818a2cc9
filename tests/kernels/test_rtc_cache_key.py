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
