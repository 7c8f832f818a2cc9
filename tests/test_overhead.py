"""What loading the plugin and one detection import (issue 13 item 1): only what the run needs.

Behaviour, not timing: each check runs in a fresh interpreter and reads ``sys.modules``. The timings
themselves are ``benchmarks/overhead.py``'s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _modules_after(code: str) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p))
    out = subprocess.run([sys.executable, "-c", code + "\nimport json, sys; print(json.dumps(RESULT))"],
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_detection_without_gpus_loads_no_vendor_runtime_module(tmp_path):
    """A Linux tree with no GPU: neither NVML, the probe, the NVIDIA or Windows module, nor package
    metadata (importlib.metadata's METADATA parser), nor the AMD cache table is loaded; that table compiles
    its patterns on its first lookup, not at import."""
    (tmp_path / "proc").mkdir()
    code = (
        "import sys\n"
        "from pytest_gpuenv.detect import detect\n"
        f"env = detect(root={str(tmp_path)!r}, probe='never')\n"
        "mods = sorted(m for m in sys.modules if m.startswith(('pytest_gpuenv', 'email')))\n"
        "from pytest_gpuenv.detect import _caches\n"
        "RESULT = {'mods': mods, 'patterns': _caches._by_name.cache_info().currsize, 'backend': env.backend}\n"
    )
    res = _modules_after(code)
    assert res["backend"] == "cpu"
    loaded = set(res["mods"])
    for lazy in ("pytest_gpuenv.runtime.nvml", "pytest_gpuenv.detect._probe", "pytest_gpuenv.detect._nvidia",
                 "pytest_gpuenv.detect._windows", "pytest_gpuenv.detect._caches", "email.parser"):
        assert lazy not in loaded, lazy
    assert res["patterns"] == 0


def test_real_detection_without_an_nvidia_driver_loads_no_nvml():
    """On the real system (no root), where neither an NVIDIA driver nor its device node exists, detection does
    not import pynvml even where nvidia-ml-py is installed (loading NVML cost 15-25 ms per process)."""
    if os.path.exists("/proc/driver/nvidia") or os.path.exists("/dev/nvidiactl"):
        pytest.skip("an NVIDIA driver is loaded here: NVML is asked by design")
    code = (
        "import sys, importlib.util\n"
        "from pytest_gpuenv.detect import detect\n"
        "detect()\n"
        "RESULT = {'installed': importlib.util.find_spec('pynvml') is not None,\n"
        "          'loaded': sorted(m for m in sys.modules if 'nvml' in m)}\n"
    )
    res = _modules_after(code)
    assert res["loaded"] == [], res


def test_pytest_does_not_rewrite_the_plugin_modules(pytester):
    """pytest would rewrite the asserts of every module of the plugin's distribution and, where it keeps no
    rewritten bytecode (PYTHONDONTWRITEBYTECODE=1), parse and compile them in every run (24-70 ms of detection
    here, against 2.5-15 ms without): the package takes itself off the rewrite list, so its modules load
    through the ordinary loader. (The test files themselves are still rewritten.)"""
    pytester.makepyfile(
        """
        import sys
        def test_loaders():
            ours = {m: type(sys.modules[m].__loader__).__name__ for m in
                    ("pytest_gpuenv.plugin", "pytest_gpuenv._session", "pytest_gpuenv.detect._core")}
            assert "AssertionRewritingHook" not in ours.values(), ours
            assert 1 + 1 == 3
        """
    )
    result = pytester.runpytest_subprocess("-p", "gpuenv")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*assert (1 + 1) == 3*"])  # the test file's own asserts are rewritten


#: what a run of plain tests never needs: the timer, the compiler, the GPU runtime (even its sticky-error
#: record), the xdist side, the markers' evaluation and the suite skips' reasons, packages only some runs use
LAZY = ("pytest_gpuenv.perf", "pytest_gpuenv.rtc", "pytest_gpuenv.runtime", "pytest_gpuenv.plan",
        "pytest_gpuenv._xdist", "pytest_gpuenv._skipping", "pytest_gpuenv._skip_patterns", "pytest_gpuenv._outputs",
        "pytest_gpuenv._hide",
        "torch", "hip", "cuda", "numpy", "tabulate", "filelock", "encodings.ascii")


def test_plugin_load_imports_no_timer_compiler_or_runtime_binding():
    """Loading the plugin imports neither the timer, the kernel compiler, the runtime, a GPU framework, nor
    what only some runs need (``LAZY``: the xdist side, the markers' evaluation, tabulate...)."""
    code = (
        "import sys\n"
        "import pytest\n"
        "before = set(sys.modules)\n"
        "import pytest_gpuenv.plugin\n"
        f"RESULT = sorted(m for m in set(sys.modules) - before if m.startswith({LAZY!r}))\n"
    )
    assert _modules_after(code) == []


def test_plain_run_on_a_cpu_machine_imports_nothing_lazy(tmp_path):
    """Collecting and running unmarked, passing tests without xdist, on a machine without GPU or ROCm (an
    empty ``--gpuenv-root``), loads none of ``LAZY`` that bare pytest does not load itself (pytest 9.2
    imports hashlib's OpenSSL, for one)."""
    (tmp_path / "root").mkdir()
    (tmp_path / "test_plain.py").write_text("def test_one():\n    assert True\n\n\ndef test_two():\n    pass\n")

    def run(*plugin: str) -> list:
        return _modules_after(
            "import os, sys\n"
            "import pytest\n"
            "os.environ['PYTEST_DISABLE_PLUGIN_AUTOLOAD'] = '1'\n"
            f"rc = pytest.main(['-q', *{list(plugin)!r}, '-p', 'no:cacheprovider', {str(tmp_path)!r}])\n"
            f"RESULT = [int(rc)] + sorted(m for m in sys.modules if m.startswith({LAZY!r}))\n"
        )

    bare = run()
    with_plugin = run("-p", "pytest_gpuenv.plugin", f"--gpuenv-root={tmp_path / 'root'}")
    assert bare[0] == with_plugin[0] == 0
    assert sorted(set(with_plugin[1:]) - set(bare[1:])) == []


@pytest.mark.slow
def test_overhead_benchmark_runs(tmp_path):
    """``benchmarks/overhead.py`` measures both settings and prints the phases (a tiny suite, one pair)."""
    out = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "overhead.py"), "--tests", "50",
                          "--pairs", "1", "--quick"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    for text in ("autoload off", "autoload on", "of which detection", "marker checks", "first detect()",
                 "heavy modules imported: "):
        assert text in out.stdout, text
    if "NVIDIA driver or device node: no" in out.stdout:  # with a driver NVML is asked by design
        assert "heavy modules imported: none" in out.stdout


def _twin(cls):
    """A dataclass generated by ``dataclasses.dataclass`` itself from the fields of a model class."""
    import dataclasses

    body = {"__annotations__": {f.name: f.type for f in dataclasses.fields(cls)}, "__qualname__": cls.__qualname__}
    for f in dataclasses.fields(cls):
        body[f.name] = dataclasses.field(default=f.default, default_factory=f.default_factory, repr=f.repr,
                                         compare=f.compare)
    return dataclasses.dataclass(frozen=cls.__dataclass_params__.frozen)(type(cls.__name__, (), body))


def test_model_records_behave_as_generated_dataclasses():
    """The model's classes (``_record.record``: methods written once, not compiled at import) construct, print,
    compare, hash, copy and serialise exactly as the dataclasses ``dataclasses.dataclass`` would generate."""
    import copy
    import dataclasses

    from pytest_gpuenv.model import ArchPattern, Device, GpuEnv, Problem

    dev = dict(index=0, vendor="amd", name="AMD Instinct MI300X", arch="gfx942", memory_bytes=2**34)
    cases = [
        (Problem, [("c", "m"), ("c", "m", "fix", "error")], [{"code": "c", "message": "m", "category": "torch"}]),
        (Device, [(0, "nvidia"), (1, "amd", "x", "gfx90a")], [dev, dict(dev, usable=False, node=3)]),
        (GpuEnv, [(), (2, "windows")], [{}, {"backend": "rocm", "devices": [Device(**dev)], "wsl": 2}]),
        (ArchPattern, [("gfx90a",), ("sm_80+",)], [{"text": "gfx94*"}]),
    ]
    for cls, positional, keywords in cases:
        twin = _twin(cls)
        made = [(cls(*a), twin(*a)) for a in positional] + [(cls(**k), twin(**k)) for k in keywords]
        for ours, theirs in made:
            assert repr(ours) == repr(theirs)
            assert dataclasses.asdict(ours) == dataclasses.asdict(theirs)
            assert ours == copy.deepcopy(ours) and ours == dataclasses.replace(ours) and ours != theirs
        assert made[0][0] != made[1][0] and made[0][1] != made[1][1]
        assert dataclasses.replace(made[0][0], **dataclasses.asdict(made[1][0])) == made[1][0]
        frozen = cls.__dataclass_params__.frozen
        assert (cls.__hash__ is None) == (twin.__hash__ is None) == (not frozen)
        if frozen:
            assert hash(made[0][0]) == hash(made[0][1]) and len({made[0][0], cls(*positional[0])}) == 1
            with pytest.raises(dataclasses.FrozenInstanceError):
                made[0][0].text = "gfx1100"
        for bad_args, bad_kwargs in [((), {"bogus": 1}), (tuple(range(30)), {})]:
            with pytest.raises(TypeError):
                cls(*bad_args, **bad_kwargs)
            with pytest.raises(TypeError):
                twin(*bad_args, **bad_kwargs)
    assert GpuEnv().devices is not GpuEnv().devices and GpuEnv().rocm is not GpuEnv().rocm
    with pytest.raises(TypeError, match="multiple values"):
        Device(0, "amd", index=1)
    with pytest.raises(TypeError, match="missing"):
        Device(0)


def test_the_internal_records_compare_hash_and_show_as_frozen_dataclasses_did():
    """``_record.Value`` gives Host, Skip, HardwareSkip, Poison and PluginMark the equality, hash and repr
    their frozen dataclasses (PluginMark: NamedTuple) had: one piece of code for all five."""
    from pytest_gpuenv._hosts import Host
    from pytest_gpuenv._session import HardwareSkip
    from pytest_gpuenv._skipping import Skip
    from pytest_gpuenv.markers import PluginMark
    from pytest_gpuenv.runtime._sticky import Poison

    cases = [(Skip, ("arch", "needs sm_90", "requires sm_90: found sm_80")),
             (HardwareSkip, ("t.py::test_a", "no-gpu", "no GPU found", "host")),
             (Poison, ("cuda", "CUDA_ERROR_ILLEGAL_ADDRESS", "t.py::test_a", False)),
             (Host, ("box", '{"k": 1}', '{"i": 2}'))]
    for cls, args in cases:
        a, b, other = cls(*args), cls(*args), cls(*args[:-1], "x")
        assert a == b and hash(a) == hash(b) and a != other and a != args and (a == args) is False
    assert repr(Poison("cuda", "E", "t")) == "Poison(backend='cuda', code='E', by='t', culprit=True, launched=None)"
    assert repr(Host("box", "k", "i")) == "Host(name='box')"
    mark = PluginMark("requires_gpu", (), {"reason": "x"})
    assert mark == PluginMark("requires_gpu", (), {"reason": "x"}) != PluginMark("requires_rocm", (), {})
    assert repr(mark) == "PluginMark(name='requires_gpu', args=(), kwargs={'reason': 'x'})"
    with pytest.raises(TypeError):
        hash(mark)  # a dict among its fields, as the NamedTuple's
