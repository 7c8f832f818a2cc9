"""compile_kernel and compile_module take the same keywords, with the same defaults and types, all spelled
out in their signatures (what ``help()`` and ``inspect.signature`` show); build_kernels, their shared body,
takes each of them but those of loading the source (``load_source``: ``kernel_dirs``, ``dialect``) and declares no
default of its own."""

import inspect

from pytest_gpuenv.rtc import compile_kernel, compile_module
from pytest_gpuenv.rtc.kernel import build_kernels


def _keywords(fn):
    return [p for p in inspect.signature(fn).parameters.values() if p.kind is p.KEYWORD_ONLY]


def test_compile_kernel_and_compile_module_take_the_same_keywords():
    kernel, module = _keywords(compile_kernel), _keywords(compile_module)
    assert [(p.name, p.default, p.annotation) for p in kernel] == [(p.name, p.default, p.annotation) for p in module]
    assert "warp_size" in [p.name for p in kernel]
    for fn in (compile_kernel, compile_module):  # spelled out, not **kwargs
        assert all(p.kind is not p.VAR_KEYWORD for p in inspect.signature(fn).parameters.values())


def test_build_kernels_takes_every_keyword_without_a_default():
    body = _keywords(build_kernels)
    assert {p.name for p in body} == {p.name for p in _keywords(compile_kernel)} - {"kernel_dirs", "dialect"}
    assert all(p.default is p.empty for p in body)
