"""What loading the plugin and one detection import: only what the run needs.

Behaviour, not timing: each check runs in a fresh interpreter and reads ``sys.modules``. The timings
themselves are ``benchmarks/overhead.py``'s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from _checkout import REPO


def _modules_after(code: str) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p))
    out = subprocess.run([sys.executable, "-c", code + "\nimport json, sys; print(json.dumps(RESULT))"],
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_detection_without_gpus_loads_no_vendor_runtime_module(tmp_path):
    """A Linux tree with no GPU: neither NVML, the probe, the NVIDIA, ROCr, /dev access, WSL or Windows module, nor package
    metadata (importlib.metadata's METADATA parser), nor the AMD cache table is loaded; that table compiles
    its patterns on its first lookup, not at import."""
    (tmp_path / "proc").mkdir()
    code = (
        "import sys\n"
        "from pytest_gpuenv.detect import detect\n"
        f"env = detect(root={str(tmp_path)!r}, probe='never')\n"
        "mods = sorted(m for m in sys.modules if m.startswith(('pytest_gpuenv', 'email')))\n"
        "from pytest_gpuenv.detect import caches\n"
        "RESULT = {'mods': mods, 'patterns': caches._by_name.cache_info().currsize, 'backend': env.backend}\n"
    )
    res = _modules_after(code)
    assert res["backend"] == "cpu"
    loaded = set(res["mods"])
    for lazy in ("pytest_gpuenv.runtime.nvml", "pytest_gpuenv.detect._probe", "pytest_gpuenv.detect._nvidia",
                 "pytest_gpuenv.detect._windows", "pytest_gpuenv.detect.caches", "pytest_gpuenv.detect._rocr",
                 "pytest_gpuenv.detect._access", "pytest_gpuenv.detect._wsl",
                 "email.parser"):
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
                    ("pytest_gpuenv.plugin", "pytest_gpuenv.session.state", "pytest_gpuenv.detect._core")}
            assert "AssertionRewritingHook" not in ours.values(), ours
            assert 1 + 1 == 3
        """
    )
    result = pytester.runpytest_subprocess("-p", "gpuenv")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*assert (1 + 1) == 3*"])  # the test file's own asserts are rewritten


#: the subsystems behind a boundary, which a run of plain tests never needs: the timer, the kernel compiler, the
#: GPU runtime's bindings, the xdist side, the features only some runs use (tolerance profiles, the capability
#: table, the plan preview, the leak check, the crash guard), and the packages only some runs use (each costs
#: 1-18 ms to import)
LAZY = ("pytest_gpuenv.perf", "pytest_gpuenv.rtc", "pytest_gpuenv.runtime.cuda", "pytest_gpuenv.runtime.hip",
        "pytest_gpuenv.runtime.nvml", "pytest_gpuenv.dist.xdist", "pytest_gpuenv.dist.hosts", "pytest_gpuenv.dist.routing",
        "pytest_gpuenv.base.tolerance", "pytest_gpuenv.base.expected", "pytest_gpuenv.session.quarantine",
        "pytest_gpuenv.guards.sanitize",
        "pytest_gpuenv.base.capabilities", "pytest_gpuenv.dist.plan", "pytest_gpuenv.guards.leak", "pytest_gpuenv.guards.crash",
        "torch", "hip", "cuda", "numpy", "tabulate", "filelock", "matplotlib")


def test_plugin_load_imports_no_subsystem_behind_a_boundary():
    """Loading the plugin imports neither the timer, the kernel compiler, a GPU runtime binding, a GPU framework,
    nor what only some runs need (``LAZY``: the xdist side, tabulate, filelock)."""
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
    empty ``--gpuenv-root``), loads none of ``LAZY`` that bare pytest does not load itself."""
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
    """``benchmarks/overhead.py`` counts the instructions of both sides under callgrind and prints the three
    figures against their goals (tiny suites, one calibration run)."""
    import shutil

    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is not installed")
    out = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "overhead.py"), "--tests", "2,5",
                          "--calibrate", "1"], capture_output=True, text=True, timeout=1800, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    for text in ("machine rate: ", "fixed cost (", "per test (", "detection (", "goal <= 15 ms", "goal <= 10 us"):
        assert text in out.stdout, text


def test_the_records_are_immutable_so_their_hash_holds():
    """The run's small records are NamedTuples or frozen dataclasses: equal when their fields are, and never
    changed after they are made (a changed field would lose the record from a set)."""
    import copy

    from pytest_gpuenv.dist.hosts import Host
    from pytest_gpuenv.marks.skipping import Skip
    from pytest_gpuenv.runtime import Poison
    from pytest_gpuenv.session.state import HardwareSkip

    for made in (Skip("arch", "needs sm_90", "requires sm_90: found sm_80"),
                 HardwareSkip("t.py::test_a", "no-gpu", "no GPU found", "host"),
                 Poison("cuda", "CUDA_ERROR_ILLEGAL_ADDRESS", "t.py::test_a", False), Host("box", "k", "i")):
        assert len({made, copy.copy(made)}) == 1
        with pytest.raises(AttributeError):  # (a frozen dataclass's FrozenInstanceError is one)
            made.by = "x"  # type: ignore[union-attr]
    assert repr(Host("box", "k", "i")) == "Host(name='box')"
