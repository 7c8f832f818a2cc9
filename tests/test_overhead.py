"""What loading the plugin and one detection import (issue 13 item 1): only what the run needs.

Behaviour, not timing: each check runs in a fresh interpreter and reads ``sys.modules``. The timings
themselves are ``benchmarks/overhead.py``'s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

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


def test_plugin_load_imports_no_timer_compiler_or_runtime_binding():
    """Loading the plugin imports neither the timer, the kernel compiler, NVML, a GPU framework, nor what
    only some runs need (tabulate, filelock, hashlib's OpenSSL)."""
    code = (
        "import sys\n"
        "import pytest\n"
        "before = set(sys.modules)\n"
        "import pytest_gpuenv.plugin\n"
        "RESULT = sorted(m for m in set(sys.modules) - before if m.startswith(('pytest_gpuenv.perf',\n"
        "    'pytest_gpuenv.rtc', 'pytest_gpuenv.runtime.nvml', 'pytest_gpuenv.runtime.cuda',\n"
        "    'pytest_gpuenv.runtime.hip', 'pytest_gpuenv.plan', 'torch', 'hip', 'cuda', 'numpy', 'tabulate',\n"
        "    'filelock', '_hashlib')))\n"
    )
    assert _modules_after(code) == []


def test_overhead_benchmark_runs(tmp_path):
    """``benchmarks/overhead.py`` measures both settings and prints the phases (a tiny suite, one pair)."""
    out = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "overhead.py"), "--tests", "50",
                          "--pairs", "1", "--quick"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    for text in ("autoload off", "autoload on", "of which detection", "marker checks", "first detect()",
                 "heavy modules imported: none"):
        assert text in out.stdout, text
