"""What pytest-gpuenv costs a run, and where that time goes.

Generates 2,000 trivial tests (``--marked 0.25`` puts a gpuenv marker on a quarter of them), then times
whole pytest processes in interleaved pairs (the order alternates pair by pair) and prints, per setting,
each side's median and the median, min and max of the per-pair ratios (wall and CPU time):

- **strict**: plugin autoloading off (``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``), ``-p gpuenv`` vs bare pytest;
- **autoload**: every installed plugin loaded, with gpuenv vs ``-p no:gpuenv`` (the other plugins dilute
  the fixed cost);

each for ``--collect-only -q`` and for running the tests (``-q``), and for scale what ``-p`` with an empty
plugin module costs pytest by itself. Then the phases inside one process
(strict setting): importing the plugin, ``pytest_configure`` (of which detection), collection hooks
(``pytest_generate_tests``, marker checks in ``pytest_collection_modifyitems``), per-test hooks (marker
evaluation at setup, the report hooks), header and summary; the plugin's slowest imports
(``python -X importtime``); and one detection as the plugin and ``gpuenv info`` run it (first call in a
fresh process, its imports included), with the heavy modules it imported (goal: none).

The modules are timed with their bytecode cached (as a pip install leaves them: this script points
``PYTHONPYCACHEPREFIX`` at a temporary folder); ``--no-bytecode`` compiles every source each run instead.
Goals (2-core CI machine): strict ratio <= 1.05, detection <= 10 ms. The machine is shared: quote ratios.
``--callgrind`` adds what wall time on a busy machine cannot give: the instructions each process of the strict
collect-only setting executes under valgrind (bare, ``-p`` an empty plugin, ``-p gpuenv``), the same from run to
run to within a few tenths of a percent (averaged over 3 memory layouts); 2-3 minutes more.

    python benchmarks/overhead.py [--tests 2000] [--pairs 5] [--marked 0.25] [--quick] [--no-bytecode] [--callgrind]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Optional

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARKS = [
    "@pytest.mark.requires_gpu",
    "@pytest.mark.requires_cuda",
    "@pytest.mark.requires_rocm",
    '@pytest.mark.requires_memory("16GiB")',
    '@pytest.mark.requires_arch("gfx94*", "sm_80+")',
    "@pytest.mark.requires_devices(2)",
    '@pytest.mark.skip_on("wsl")',
]
HEAVY = ("torch", "hip", "cuda", "cupy", "triton", "numpy", "pynvml")


def make_suite(path: str, n_tests: int, marked: float, per_file: int = 50) -> None:
    every = round(1 / marked) if marked > 0 else 0
    for f in range(max(1, n_tests // per_file)):
        lines = ["import pytest", ""]
        for t in range(per_file):
            i = f * per_file + t
            if every and i % every == 0:
                lines.append(MARKS[i % len(MARKS)])
            lines.append(f"def test_{i}():\n    assert True\n")
        with open(os.path.join(path, f"test_gen_{f:03d}.py"), "w") as fh:
            fh.write("\n".join(lines))
    with open(os.path.join(path, "pytest.ini"), "w") as fh:
        fh.write("[pytest]\n")


def base_env(pycache: Optional[str], autoload: bool) -> dict[str, str]:
    """The checkout first on sys.path (the entry point names the module), bytecode cached or not."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, env.get("PYTHONPATH")) if p)
    env.pop("PYTEST_ADDOPTS", None)
    if pycache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = pycache
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    if autoload:
        env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    else:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env


def plugin_arg() -> str:
    """``gpuenv`` (the entry point, as users write it) when installed, else the module."""
    from importlib.metadata import entry_points

    try:
        found = list(entry_points(group="pytest11", name="gpuenv"))
    except TypeError:  # Python 3.9
        found = [e for e in entry_points().get("pytest11", ()) if e.name == "gpuenv"]
    return "gpuenv" if found else "pytest_gpuenv.plugin"


def run_once(cmd: list[str], cwd: str, env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one whole process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode not in (0, 5):
        raise SystemExit(f"failed ({' '.join(cmd)}):\n{r.stdout.decode(errors='replace')[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def pairs(a: list[str], b: list[str], cwd: str, env: dict[str, str], n: int) -> dict[str, list[float]]:
    """n interleaved pairs after one warm-up of each; the order within a pair alternates."""
    run_once(a, cwd, env)
    run_once(b, cwd, env)
    out: dict[str, list[float]] = {"a_wall": [], "b_wall": [], "a_cpu": [], "b_cpu": []}
    for i in range(n):
        order = [("a", a), ("b", b)] if i % 2 == 0 else [("b", b), ("a", a)]
        for side, cmd in order:
            wall, cpu = run_once(cmd, cwd, env)
            out[f"{side}_wall"].append(wall)
            out[f"{side}_cpu"].append(cpu)
    return out


def ratio_text(t: dict[str, list[float]], kind: str) -> str:
    r = [x / y for x, y in zip(t[f"a_{kind}"], t[f"b_{kind}"])]
    return f"{statistics.median(r):.3f} [{min(r):.3f}-{max(r):.3f}]"


def settings(cwd: str, pycache: Optional[str], n: int, quick: bool) -> list[tuple[str, dict[str, list[float]]]]:
    py = [sys.executable, "-m", "pytest", "-q"]
    p = plugin_arg()
    rows = []
    for autoload in (False, True):
        env = base_env(pycache, autoload)
        for mode in (["--collect-only"], []) if not quick else (["--collect-only"],):
            if autoload:
                a, b = [*py, *mode, "-p", "no:randomly"], [*py, *mode, "-p", "no:randomly", "-p", "no:gpuenv"]
                name = "autoload on, with vs -p no:gpuenv"
            else:
                a, b = [*py, *mode, "-p", p], [*py, *mode]
                name = f"autoload off, -p {p} vs bare"
            rows.append((f"{name}, {'collect-only' if mode else 'run'}", pairs(a, b, cwd, env, n)))
    # what any ``-p NAME`` costs pytest (it reads every installed distribution's entry points first)
    with open(os.path.join(cwd, "empty_plugin.py"), "w") as fh:
        fh.write('"""A plugin with nothing in it."""\n')
    env = base_env(pycache, autoload=False)
    env["PYTHONPATH"] = cwd + os.pathsep + env["PYTHONPATH"]
    rows.append(("(for scale) autoload off, -p empty_plugin vs bare, collect-only",
                 pairs([*py, "--collect-only", "-p", "empty_plugin"], [*py, "--collect-only"], cwd, env, n)))
    return rows


PHASES_SNIPPET = r"""
import functools, inspect, json, sys, time
import pytest
t0 = time.perf_counter()
import pytest_gpuenv.plugin as P
imported = time.perf_counter() - t0
acc = {}
def timed(key, f):
    if inspect.isgeneratorfunction(f):
        @functools.wraps(f)
        def g(*a):
            gen = f(*a); t = time.perf_counter(); v = next(gen); acc[key] = acc.get(key, 0) + time.perf_counter() - t
            res = yield v
            t = time.perf_counter()
            try:
                gen.send(res)
            except StopIteration as e:
                return e.value
            finally:
                acc[key] = acc.get(key, 0) + time.perf_counter() - t
        return g
    @functools.wraps(f)
    def w(*a):
        t = time.perf_counter()
        try:
            return f(*a)
        finally:
            acc[key] = acc.get(key, 0) + time.perf_counter() - t
    return w
for name in dir(P):
    if name.startswith("pytest_") and callable(getattr(P, name)):
        setattr(P, name, timed(name, getattr(P, name)))
for mod in [m for n, m in list(sys.modules.items()) if n.startswith("pytest_gpuenv")]:
    for cls in [c for c in vars(mod).values() if isinstance(c, type) and c.__module__ == mod.__name__]:
        for name, f in list(vars(cls).items()):  # the plugin objects it registers (skips, crash guard, xdist)
            if name.startswith("pytest_") and inspect.isfunction(f):
                setattr(cls, name, timed(name, f))
seen = {}
class Spy:
    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config):
        seen["detect"] = P.get_env(config).detect_seconds
t = time.perf_counter()
pytest.main(sys.argv[1:] + ["-p", "pytest_gpuenv.plugin"], plugins=[Spy()])
acc["total_main"] = time.perf_counter() - t
print(json.dumps({"import": imported, "detect": seen.get("detect"), **acc}))
"""

PHASE_GROUPS = [
    ("import pytest_gpuenv.plugin", ("import",)),
    ("pytest_configure (options, host, detection, markers)", ("pytest_configure",)),
    ("  of which detection (GpuEnv.detect_seconds)", ("detect",)),
    ("pytest_addoption", ("pytest_addoption",)),
    ("collection: pytest_generate_tests (all functions)", ("pytest_generate_tests",)),
    ("collection: marker checks (pytest_collection_modifyitems)", ("pytest_collection_modifyitems",)),
    ("per test: marker evaluation (pytest_runtest_setup)", ("pytest_runtest_setup",)),
    ("per test: reports (makereport, logreport, logstart/logfinish)",
     ("pytest_runtest_makereport", "pytest_runtest_logreport", "pytest_runtest_logstart", "pytest_runtest_logfinish")),
    ("header and summary (report_header, terminal_summary)", ("pytest_report_header", "pytest_terminal_summary")),
]
OTHER = "the other hooks (collectreport, sessionstart/finish, unconfigure...)"


def phases(cwd: str, pycache: Optional[str], repeat: int, quick: bool) -> None:
    env = base_env(pycache, autoload=False)
    modes = (("collect-only", ["--collect-only", "-q"]), ("run", ["-q"]))
    for label, args in modes[:1] if quick else modes:
        runs = []
        for _ in range(repeat + 1):  # the first writes the bytecode
            r = subprocess.run([sys.executable, "-c", PHASES_SNIPPET, *args], cwd=cwd, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
            runs.append(json.loads(r.stdout.decode().strip().splitlines()[-1]))
        runs = runs[1:]
        print(f"\nwhere the plugin's time goes, strict setting, {label} (median of {repeat} processes, ms):")
        named = {k for _, keys in PHASE_GROUPS for k in keys} | {"total_main"}
        for name, keys in [*PHASE_GROUPS, (OTHER, tuple({k for x in runs for k in x} - named))]:
            vals = [sum((x.get(k) or 0.0) for k in keys) * 1e3 for x in runs]
            print(f"  {name:<68} {statistics.median(vals):8.2f}")
        total = statistics.median(x["total_main"] for x in runs) * 1e3
        print(f"  {'(the whole pytest.main, for scale)':<68} {total:8.2f}")


def slowest_imports(pycache: Optional[str], top: int = 8) -> None:
    code = "import pytest; import pytest_gpuenv.plugin; from pytest_gpuenv.detect import detect; detect()"
    env = base_env(pycache, autoload=False)
    subprocess.run([sys.executable, "-c", code], env=env, timeout=120, check=True)  # bytecode
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", code], env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=120, check=True)
    rows, ours = [], False
    for line in r.stderr.decode().splitlines():
        parts = line.split("|")
        if len(parts) != 3 or not parts[0].startswith("import time:") or "self [us]" in line:
            continue
        name = parts[2].strip()
        if name == "pytest_gpuenv" or name.startswith("pytest_gpuenv."):
            ours = True  # modules imported after the plugin's first: its own and what they pulled in
        if ours:
            rows.append((int(parts[0].split(":")[1]), name))
    print(f"\nmodules imported by the plugin and one detect() ({len(rows)}, {sum(r[0] for r in rows) / 1e3:.1f} ms "
          f"self under -X importtime; slowest {top}):")
    for us, name in sorted(rows, reverse=True)[:top]:
        print(f"  {us / 1e3:6.2f} ms  {name}")


DETECT_SNIPPET = r"""
import json, statistics, sys, time
import pytest, pytest_gpuenv.plugin
from pytest_gpuenv.detect import detect
t0 = time.perf_counter(); env = detect(); first = time.perf_counter() - t0
t = []
for _ in range(20):
    t0 = time.perf_counter(); detect(); t.append(time.perf_counter() - t0)
heavy = sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)
import importlib.util
print(json.dumps({"first": first, "again": statistics.median(t), "backend": env.backend,
                  "devices": len(env.devices), "heavy": heavy,
                  "pynvml": importlib.util.find_spec("pynvml") is not None, "nvml_loaded": "pynvml" in sys.modules}))
"""


def detection(pycache: Optional[str], repeat: int) -> None:
    env = base_env(pycache, autoload=False)
    code = DETECT_SNIPPET.replace("HEAVY", repr(HEAVY))
    plugin, cli = [], []
    for i in range(repeat + 1):
        r = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, timeout=120, check=True)
        c = subprocess.run([sys.executable, "-m", "pytest_gpuenv", "info", "--json"], env=env,
                           stdout=subprocess.PIPE, timeout=120)
        if i:
            plugin.append(json.loads(r.stdout.decode().strip().splitlines()[-1]))
            cli.append(json.loads(c.stdout.decode())["detect_seconds"])
    first = [x["first"] * 1e3 for x in plugin]
    print(f"\ndetection (median of {repeat} fresh processes; goal <= 10 ms):")
    print(f"  first detect() after loading the plugin: {statistics.median(first):.2f} ms "
          f"[{min(first):.2f}-{max(first):.2f}]; again in the same process "
          f"{statistics.median(x['again'] for x in plugin) * 1e3:.2f} ms")
    print(f"  `gpuenv info` (its detect_seconds): {statistics.median(cli) * 1e3:.2f} ms "
          f"[{min(cli) * 1e3:.2f}-{max(cli) * 1e3:.2f}]")
    last = plugin[-1]
    print(f"  -> backend {last['backend']}, {last['devices']} device(s); heavy modules imported: "
          f"{last['heavy'] or 'none'} (goal: none)")
    in_pytest = []
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "test_one.py"), "w") as fh:
            fh.write("def test_one():\n    pass\n")
        # autoload on (pytest then rewrites the asserts of a pytest11 plugin's modules unless told not to), and
        # no rewritten bytecode kept: as under PYTHONDONTWRITEBYTECODE=1 or in a read-only site-packages
        plain = base_env(None, autoload=True)
        for _ in range(repeat):
            report = os.path.join(tmp, "r.json")
            subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--gpuenv-json={report}"],
                           env=plain, cwd=tmp, stdout=subprocess.DEVNULL, timeout=120, check=True)
            with open(report) as fh:
                in_pytest.append(json.load(fh)["environment"]["detect_seconds"] * 1e3)
    print(f"  in a pytest run, no bytecode kept (PYTHONDONTWRITEBYTECODE=1): {statistics.median(in_pytest):.2f} ms "
          f"[{min(in_pytest):.2f}-{max(in_pytest):.2f}]")
    # NVML is asked only where an NVIDIA driver (/proc/driver/nvidia) or device node (/dev/nvidiactl) exists
    nv = os.path.exists("/proc/driver/nvidia") or os.path.exists("/dev/nvidiactl")
    print(f"  -> nvidia-ml-py (pynvml) installed: {'yes' if last['pynvml'] else 'no'}; NVIDIA driver or device node: "
          f"{'yes' if nv else 'no'}; NVML loaded by detection: {'yes' if last['nvml_loaded'] else 'no'}"
          f"{' (goal: no)' if not nv else ''}")


def instructions(cwd: str, pycache: Optional[str], layouts: int = 3) -> None:
    """Instructions (valgrind's callgrind) of one strict collect-only process: bare, -p empty_plugin, -p gpuenv."""
    import re
    import shutil

    if shutil.which("valgrind") is None:
        print("\ninstructions: valgrind is not installed")
        return
    py = [sys.executable, "-m", "pytest", "-q", "--collect-only"]
    sides = [("bare", py), ("-p empty_plugin", [*py, "-p", "empty_plugin"]), (f"-p {plugin_arg()}", [*py, "-p", plugin_arg()])]
    env = base_env(pycache, autoload=False)
    env["PYTHONPATH"] = cwd + os.pathsep + env["PYTHONPATH"]
    env["PYTHONHASHSEED"] = "0"
    counts: dict[str, list[int]] = {name: [] for name, _ in sides}
    for layout in range(layouts):  # the environment's size moves the heap: a few tenths of a percent
        for name, cmd in sides:
            lay = dict(env, GPUENV_BENCH_LAYOUT="x" * 41 * layout)
            r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd], cwd=cwd, env=lay,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600)
            m = re.search(r"Collected : (\d+)", r.stderr.decode(errors="replace"))
            counts[name].append(int(m.group(1)) if m else 0)
    bare = statistics.mean(counts["bare"])
    print(f"\ninstructions, strict collect-only (callgrind, mean of {layouts} layouts; goal: ratio <= 1.05):")
    for name, _ in sides:
        n = statistics.mean(counts[name])
        print(f"  {name:<20} {n / 1e6:9.1f} M  {n / bare:.4f}x bare  (+{(n - bare) / 1e6:.1f} M)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tests", type=int, default=2000)
    ap.add_argument("--pairs", "--rounds", type=int, default=5, help="interleaved pairs per setting")
    ap.add_argument("--marked", type=float, default=0.0, help="fraction of tests with a gpuenv marker")
    ap.add_argument("--quick", action="store_true", help="collect-only, one profile run (a smoke test)")
    ap.add_argument("--no-bytecode", action="store_true", help="compile every module from source each run")
    ap.add_argument("--callgrind", action="store_true", help="also count instructions under valgrind (deterministic)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        suite, pycache = os.path.join(d, "suite"), None if args.no_bytecode else os.path.join(d, "pyc")
        os.mkdir(suite)
        make_suite(suite, args.tests, args.marked)
        print(f"suite: {args.tests} trivial tests, {args.marked:.0%} with a gpuenv marker; "
              f"bytecode {'compiled each run' if args.no_bytecode else 'cached'}; {args.pairs} interleaved pairs")
        print(f"{'setting':<66} {'A median s':>10} {'B median s':>10}  {'A/B wall [min-max]':>22}  "
              f"{'A/B cpu [min-max]':>22}")
        for name, t in settings(suite, pycache, args.pairs, args.quick):
            print(f"{name:<66} {statistics.median(t['a_wall']):10.3f} {statistics.median(t['b_wall']):10.3f}  "
                  f"{ratio_text(t, 'wall'):>22}  {ratio_text(t, 'cpu'):>22}")
        print("goal: autoload off ratio <= 1.05")
        phases(suite, pycache, 1 if args.quick else 5, args.quick)
        slowest_imports(pycache)
        detection(pycache, 1 if args.quick else 5)
        if args.callgrind:
            instructions(suite, pycache)


if __name__ == "__main__":
    main()
