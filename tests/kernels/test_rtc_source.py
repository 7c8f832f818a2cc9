"""Kernel sources without a compiler: the signature parser, includes, lookup, compiler-log parsing."""

from __future__ import annotations

import pytest

from pytest_gpuenv.rtc import KernelCompileError
from pytest_gpuenv.rtc.logs import first_error
from pytest_gpuenv.rtc.source import find_headers, find_kernels, kernel_decl, load_source, parse_param, split_params


@pytest.mark.parametrize(
    "decl, name, type_, pointer, code",
    [
        ("float *out", "out", "float", True, "P"),
        ("const float* __restrict__ a", "a", "float", True, "P"),
        ("int n", "n", "int", False, "i"),
        ("unsigned int n", "n", "unsigned int", False, "I"),
        ("unsigned n", "n", "unsigned", False, "I"),
        ("size_t n", "n", "size_t", False, "Q"),
        ("const size_t  n", "n", "size_t", False, "Q"),
        ("double alpha", "alpha", "double", False, "d"),
        ("__half* h", "h", "__half", True, "P"),
        ("__half scale", "scale", "__half", False, "e"),
        ("long long k", "k", "long long", False, "q"),
        ("std::uint64_t m", "m", "uint64_t", False, "Q"),
        ("float2 v", "v", "float2", False, None),
        ("float out[]", "out", "float", True, "P"),
    ],
)
def test_parse_param(decl, name, type_, pointer, code):
    p = parse_param(decl)
    assert (p.name, p.type, p.pointer, p.code) == (name, type_, pointer, code)


def test_split_params_keeps_bracketed_commas():
    """Commas inside template arguments, calls, subscripts and braced initialisers do not split a list."""
    assert split_params("std::pair<int, float> p, float* x = f(1, 2), int a = b[1], S s = S{1, 2}") == [
        "std::pair<int, float> p", "float* x = f(1, 2)", "int a = b[1]", "S s = S{1, 2}"]
    assert split_params(" void ") == ["void"] and split_params("") == []


def test_find_kernels_forms():
    src = """
    #include <hip/hip_runtime.h>
    // extern "C" __global__ void commented_out(int x) {}
    /* __global__ void also_commented(int y) {} */
    extern "C" __global__ void a(float* out, const float* __restrict__ in, int n) {}
    extern "C" __global__ void __launch_bounds__(256) b(unsigned int n) {}
    extern "C" __launch_bounds__(256, 2) __global__ void c(void) {}
    __global__ void mangled(int n) {}
    extern "C" {
    __global__ void d(double x,
                      size_t n) {}
    }
    """
    ks = find_kernels(src)
    assert sorted(ks) == ["a", "b", "c", "d", "mangled"]
    assert [p.name for p in ks["a"].params] == ["out", "in", "n"]
    assert [p.type for p in ks["d"].params] == ["double", "size_t"]
    assert ks["c"].params == []
    assert ks["d"].extern_c and ks["a"].extern_c and not ks["mangled"].extern_c
    assert ks["a"].line == 5


def test_kernel_names_and_name_expressions():
    src = load_source('extern "C" __global__ void k(int n) {}\n__global__ void m(int n) {}\n'
                      "template <int TILE,\n          typename T> __global__ void tr(T* o) {}\n"
                      "namespace ns { __global__ void scale(float* x) {} }\n")
    assert kernel_decl(src, "k").name == "k" and kernel_decl(src, "k").extern_c
    assert kernel_decl(src, "m").name == "m" and not kernel_decl(src, "m").extern_c  # C++ linkage: by name expression
    assert kernel_decl(src, "tr<16, float>").template == "int TILE, typename T"
    assert kernel_decl(src, "ns::scale").params[0].name == "x"
    with pytest.raises(KernelCompileError, match=r"kernel 'nope<3>' not found in the given source \(__global__ kernels "
                       r"there: k, m, scale, tr<int TILE, typename T> declared at line 4\)"):
        kernel_decl(src, "nope<3>")


def test_load_source_lookup(tmp_path):
    kdir = tmp_path / "kernels"
    kdir.mkdir()
    (kdir / "k.hip").write_text('extern "C" __global__ void k(int n) {}\n')
    src = load_source("k.hip", [str(kdir)])
    assert src.path == str(kdir / "k.hip") and src.display == src.path
    with pytest.raises(KernelCompileError, match=r"kernel file 'missing.hip' not found \(searched: .*kernels/missing.hip"):
        load_source("missing.hip", [str(kdir)])
    inline = load_source('extern "C" __global__ void k(int n) {}')
    assert inline.path is None


def test_find_headers_follows_quoted_and_angle_includes(tmp_path):
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "common.h").write_text('#include "deep.h"\n#define X 1\n')
    (inc / "deep.h").write_text("#define Y 2\n")
    (tmp_path / "local.h").write_text("#define Z 3\n")
    k = tmp_path / "k.hip"
    k.write_text('#include <hip/hip_runtime.h>\n#include "local.h"\n#include <common.h>\n// #include "ignored.h"\n')
    headers = find_headers(load_source(str(k)), [str(inc)])
    assert [p.rsplit("/", 1)[1] for p, _ in headers] == ["local.h", "common.h", "deep.h"]


@pytest.mark.parametrize(
    "log, expect",
    [
        ("/x/k.hip:5:2: error: use of undeclared identifier 'u'\n", ("/x/k.hip", 5, "use of undeclared identifier 'u'")),
        ('/x/k.hip(7): error: identifier "nope" is undefined\n', ("/x/k.hip", 7, 'identifier "nope" is undefined')),
        ("warning first\n/x/k.hip:1:10: fatal error: 'a.h' file not found\n", ("/x/k.hip", 1, "'a.h' file not found")),
        ('k.hip(1): catastrophic error: cannot open source file "a.h"\n', ("k.hip", 1, 'cannot open source file "a.h"')),
        ("nvrtc: error: invalid value for --gpu-architecture (-arch)\n", None),
    ],
)
def test_first_error(log, expect):
    assert first_error(log) == expect


@pytest.mark.parametrize("name", ["we{ird}.hip", "semi;colon.hip", "new\nline.hip"])
def test_a_kernel_path_with_source_characters_is_a_path(tmp_path, name):
    """``{``, ``}``, ``;`` or a newline in a file's name: an existing file is read, not taken for inline source."""
    from pytest_gpuenv.rtc.source import load_source

    p = tmp_path / name
    p.write_text('extern "C" __global__ void k(float* o) { o[0] = 1.0f; }\n')
    src = load_source(str(p))
    assert src.path == str(p) and "__global__" in src.text
    assert load_source(name, [str(tmp_path)]).path == str(p)  # found through kernel_dirs too
    assert load_source('extern "C" __global__ void k(float* o) { o[0] = 1.0f; }').path is None


def test_a_source_is_parsed_once_and_handed_on(monkeypatch, tmp_path):
    """Its comments are stripped once for the kernel lookup, the name targets and the include scan together;
    a Source given to a compile is the one used (not read again), in the dialect asked for."""
    from pytest_gpuenv.rtc import source as source_module
    from pytest_gpuenv.rtc.kernel import given_source

    monkeypatch.chdir(tmp_path)  # an inline source's quoted includes are looked up here
    stripped = []
    strip = source_module.strip_comments
    monkeypatch.setattr(source_module, "strip_comments", lambda text: stripped.append(text) or strip(text))
    text = '#include "h.h"\n// a comment\nextern "C" __global__ void k(float* o, int n) {}\n'
    src = load_source(text)
    assert src.targets(["k"]) is src.targets(["k"]) and src.targets(["k"])[0].simple
    assert kernel_decl(src, "k").params[1].name == "n"
    assert find_headers(src, [str(tmp_path)]) == [] and src.includes == [(True, "h.h")]
    assert stripped == [text]
    assert given_source(src, ["/nowhere"], None) is src
    cuda = given_source(src, None, "cuda")
    assert (cuda.dialect, cuda.display, cuda.text) == ("cuda", "<source>.cu", text)
    assert given_source(cuda, None, "cuda") is cuda
    (tmp_path / "k.cu").write_text(text)
    assert load_source("k.cu", [str(tmp_path)]).dialect == "cuda"
    assert load_source("k.cu", [str(tmp_path)], "hip").dialect == "hip"
    with pytest.raises(ValueError, match="dialect must be 'hip' or 'cuda'"):
        load_source(text, dialect="fortran")


def test_function_uses_reads_function_bodies_only():
    """Bodies of functions at namespace, class and ``extern "C"`` scope, past macros with braces and initialisers;
    what a body uses is what a shared-memory count follows (``_cpu.check_shared_limit``)."""
    from pytest_gpuenv.rtc.source import function_uses

    text = """#define K(n) __global__ void k##n() { hidden(); }
K(0) K(1)
__constant__ int table[] = {1, 2};
namespace ns { template <class T, int N> __global__ void __launch_bounds__(256) scan(T* o) { step(o); } }
extern "C" { __device__ float step(float (*f)(float)) noexcept { return g(1); } }
struct S { __device__ int m(int a) const { if (a) { return w(a); } return 0; } };
"""
    assert function_uses(text) == {"scan": frozenset({"step", "o"}), "step": frozenset({"return", "g"}),
                                   "m": frozenset({"if", "a", "return", "w"})}


def test_kernels_in_quoted_headers_are_found_and_name_their_header(tmp_path):
    (tmp_path / "inc").mkdir()
    (tmp_path / "main.hip").write_text('#include <hip/hip_runtime.h>\n#include "inc/kernels.h"\n')
    (tmp_path / "inc" / "kernels.h").write_text('#include "more.h"\n')
    (tmp_path / "inc" / "more.h").write_text("template <int N>\n__global__ void fill(int* o) { o[0] = N; }\n")
    src = load_source(str(tmp_path / "main.hip"))
    assert src.kernels["fill"].file == str(tmp_path / "inc" / "more.h")
    assert src.kernels["fill"].describe() == "fill<int N> declared at more.h:2"


def test_kernels_in_headers_found_through_the_include_path_are_found(tmp_path, monkeypatch):
    """A quoted include is looked up beside the including file, then in the include path in order, as the
    compiler does (HeCBench's ``-I../extrema-cuda``): the first file found is the one read."""
    for d in ("src", "a", "b"):
        (tmp_path / d).mkdir()
    (tmp_path / "src" / "main.hip").write_text('#include <hip/hip_runtime.h>\n#include "kernels.h"\n')
    (tmp_path / "a" / "kernels.h").write_text('#include "more.h"\n__global__ void first(int* o) { o[0] = 1; }\n')
    (tmp_path / "b" / "kernels.h").write_text("__global__ void second(int* o) { o[0] = 2; }\n")
    (tmp_path / "b" / "more.h").write_text("__global__ void more(int* o) { __shared__ int s[4]; o[0] = s[0]; }\n")
    src = load_source(str(tmp_path / "src" / "main.hip"))
    assert src.kernels == {}  # beside the file only
    found = src.searching([str(tmp_path / "a")], ["-I", str(tmp_path / "b")])
    assert sorted(found.kernels) == ["first", "more"]  # a/kernels.h hides b/kernels.h; more.h is b's
    assert found.kernels["more"].file == str(tmp_path / "b" / "more.h")
    assert "s" in found.function_uses["more"]
    assert found is src.searching([str(tmp_path / "a")], ["-I", str(tmp_path / "b")])
    assert kernel_decl(found, "first").name == "first"
    (tmp_path / "src" / "kernels.h").write_text("__global__ void mine(int* o) { o[0] = 0; }\n")
    assert sorted(load_source(str(tmp_path / "src" / "main.hip")).searching([str(tmp_path / "a")]).kernels) == ["mine"]
