"""What pytest-gpuenv adds to a pytest run, as CPU instructions under callgrind (valgrind), against its goals.

Instruction counts do not move with the machine's load (the same process gives the same count to within a few
instructions), so they are the figures; each is also shown in milliseconds at this machine's measured rate.

- **fixed cost**: the instructions ``-p pytest_gpuenv.plugin`` adds to a whole ``pytest -q`` process on a
  one-test suite (importing the plugin, configuring with detection, the collection hooks, header and
  summary), less one test's per-test cost. Goal: at most 15 ms.
- **per test**: the slope of the added instructions over suites of trivial tests (``--tests 50,1300``; with
  more than two sizes, the least-squares slope): the plugin's hooks at collection, setup and report, per test.
  These runs name a third module with ``-p`` on both sides, before the other, that turns the automatic garbage
  collector off (``gc.disable()``) as it is imported, before any test is collected: its full collections would
  fall at different tests on either side, steps of several million instructions that swamp a per-test figure
  (as they made the slope between 50 and 300 tests move by 5-20 k instructions between runs). The collection
  pytest itself makes at the end (``gc.collect()`` in its unconfigure) still runs on both sides: what it spends
  on the objects the plugin keeps per test is counted. Goal: at most 10 us. A second line gives the part of it
  that is no hook's work: the same slope where the bare side's module only imports ``pytest_gpuenv.plugin``
  (every module the plugin loads, no hook registered). With more code loaded the interpreter's attribute
  look-ups miss its type cache more often (callgrind puts that part in ``find_name_in_mro`` and the dictionary
  look-ups under it), so pytest's own per-test work costs more: 5-11 k instructions per test here, for ten
  stdlib modules or the plugin's.
  The figure is the same to within about 0.5 k from run to run, but that cache also makes it depend on where
  things lie in memory, which the hash seed and any loaded text move: with ``PYTHONHASHSEED`` 0, 1 and 2 the
  same checkout gave 23.2, 22.1 and 23.3 k, and 32.5 k under seed 2 in a scratch run whose empty module had no
  docstring; the split into hooks and the rest moves the same way (hooks 15 k with seed 0, 22 k as the mean of
  0, 1 and 2). ``--seeds 0,1,2`` runs the per-test suites under each seed and gives their mean (and each), a
  figure less tied to one layout; ``--jobs`` runs that many of those callgrind processes at once (the counts
  do not depend on it).
- **detection**: the first ``detect()`` of a fresh process that imported ``pytest_gpuenv.detect``, on this
  machine (the lazily imported platform modules included). Goal: at most 10 ms (CPU; 50 ms with NVML).

Both sides run with plugin autoloading off (``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``), ``PYTHONHASHSEED=0``, no
``GPUENV_*`` variable, and the modules' bytecode cached (as a pip install leaves it: ``PYTHONPYCACHEPREFIX``
points at a temporary folder, written by a first native run). Each side names one plugin with ``-p``: the plugin
side ``pytest_gpuenv.plugin``, the bare side an empty module. pytest looks a ``-p`` name up among every installed
distribution's entry points (reading each one's ``entry_points.txt``), which a run with autoloading on (how a pip
install loads the plugin) does in every run, with or without the plugin: that lookup is on both sides, and is
printed on its own line (``-p lookup``), not counted as the plugin's.

**Milliseconds**: the rate is measured, not assumed: the one-test ``-p pytest_gpuenv.plugin`` process runs
natively ``--calibrate`` times (default 7); its instructions divided by the smallest user CPU time of those runs
give instructions per second (kernel time is left out, as callgrind counts user-space instructions only). On a
busy machine the rate reads low and the milliseconds high.

``--where`` adds where the fixed instructions go: importing the plugin, detection, the rest; and, across the
whole process, a few C functions of the interpreter (``callgrind_annotate``, inclusive): parsing and compiling
generated code (the methods dataclasses and NamedTuples write), class creation, unmarshalling bytecode, the
garbage collector. Then where the per-test cost goes: in one native ``pytest --collect-only`` process over the
largest suite, each of the plugin's per-test hooks is run again over every test (warm: the best of 20 rounds of
CPU time): ``pytest_generate_tests`` on each test function, ``pytest_collection_modifyitems`` over the items,
and a test's three ``pytest_runtest_logreport`` calls with the plugin's reporter registered against without it;
their sum is shown against the slope in microseconds.

    python benchmarks/overhead.py [--tests 50,1300] [--seeds 0] [--jobs 2] [--calibrate 7] [--where]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Optional

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLUGIN = "pytest_gpuenv.plugin"
GOAL_FIXED_MS, GOAL_PER_TEST_US, GOAL_DETECT_MS, GOAL_DETECT_NVML_MS = 15.0, 10.0, 10.0, 50.0
#: the interpreter's C functions --where compares (inclusive instructions), with what each stands for
WHERE = [
    ("_PyParser_ASTFromString", "parsing generated source (the methods dataclasses and NamedTuples write)"),
    ("_PyAST_Compile", "compiling generated source"),
    ("builtin___build_class__", "creating classes (the class bodies; dataclass processing included)"),
    ("marshal_loads", "unmarshalling the modules' cached bytecode"),
    ("gc_collect_main", "garbage collection"),
]


def make_suite(path: str, n_tests: int, per_file: int = 50) -> None:
    os.makedirs(path)
    for f in range(max(1, -(-n_tests // per_file))):
        count = min(per_file, n_tests - f * per_file)
        body = [f"def test_{f * per_file + t}():\n    assert True\n" for t in range(count)]
        with open(os.path.join(path, f"test_gen_{f:03d}.py"), "w") as fh:
            fh.write("\n".join(body))
    with open(os.path.join(path, "pytest.ini"), "w") as fh:
        fh.write("[pytest]\n")


def bench_env(pycache: str, modules: str) -> dict[str, str]:
    """The checkout first on sys.path (then ``modules``, the empty plugin's folder), autoloading off, bytecode
    cached, a fixed hash seed, no gpuenv option."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUENV_")}
    for name in ("PYTEST_ADDOPTS", "PYTHONDONTWRITEBYTECODE", "PYTEST_PLUGINS"):
        env.pop(name, None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, modules, env.get("PYTHONPATH")) if p)
    env.update(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONPYCACHEPREFIX=pycache, PYTHONHASHSEED="0")
    return env


#: the bare side's plugin: an empty module (written beside the suites, on the path)
EMPTY = "gpuenv_bench_empty"
#: the module both sides of the per-test runs name first: it turns the automatic garbage collector off
NOGC = "gpuenv_bench_nogc"
#: a plugin that only imports the plugin's modules (registering none of its hooks)
IMPORTED = "gpuenv_bench_imported"


def pytest_cmd(plugin: Optional[bool], nogc: bool = False, imported: bool = False) -> list[str]:
    """``pytest -q`` with the plugin (True), with the empty module (False, or the module that only imports the
    plugin's with ``imported``) or with no ``-p`` at all (None); ``nogc``: with the automatic garbage collector
    off from the first ``-p`` module on."""
    named = [] if plugin is None else ["-p", PLUGIN if plugin else IMPORTED if imported else EMPTY]
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *(["-p", NOGC] if nogc else []), *named]


def slope(points: dict[int, float]) -> tuple[float, float]:
    """The least-squares slope of ``points`` (size: instructions; with two sizes, the plain slope), and the
    largest distance of a point from that line (0 with two sizes)."""
    mx = sum(points) / len(points)
    my = sum(points.values()) / len(points)
    b = sum((x - mx) * (y - my) for x, y in points.items()) / sum((x - mx) ** 2 for x in points)
    return b, max(abs(y - my - b * (x - mx)) for x, y in points.items())


def native(cmd: list[str], cwd: str, env: dict[str, str]) -> float:
    """User CPU seconds of one native run (which also writes the bytecode the callgrind runs read)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    r = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    if r.returncode not in (0, 5):
        raise SystemExit(f"failed ({' '.join(cmd)}):\n{r.stdout.decode(errors='replace')[-2000:]}")
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before


def instructions(cmd: list[str], cwd: str, env: dict[str, str], out: str = "/dev/null") -> int:
    """Instructions of one process under callgrind (after a native run that writes its bytecode); ``out``: where
    callgrind writes its profile."""
    native(cmd, cwd, env)
    r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *cmd], cwd=cwd, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=3600)
    m = re.search(r"Collected : (\d+)", r.stderr.decode(errors="replace"))
    if r.returncode not in (0, 5) or m is None:
        raise SystemExit(f"callgrind failed ({' '.join(cmd)}):\n{r.stderr.decode(errors='replace')[-2000:]}")
    return int(m.group(1))


def inclusive(path: str) -> dict[str, int]:
    """Inclusive instructions of the functions in ``WHERE``, from a callgrind output file."""
    r = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", path], capture_output=True,
                       text=True, timeout=600)
    out: dict[str, int] = {}
    for line in r.stdout.splitlines():
        m = re.match(r"\s*([\d,]+) .*?:(\w+) \[", line)  # (a recursive call's inner frames are named 'f'2')
        if m and m.group(2) in dict(WHERE) and m.group(2) not in out:
            out[m.group(2)] = int(m.group(1).replace(",", ""))
    return out


def ms(n: float, rate: float) -> float:
    return n / rate * 1e3


def verdict(value: float, goal: float) -> str:
    return "met" if value <= goal else "MISSED"


def where(tmp: str, tiny: str, env: dict[str, str], rate: float, fixed: float, detect: int) -> None:
    files = {side: os.path.join(tmp, f"{side}.callgrind") for side in ("bare", "plugin")}
    for side, path in files.items():
        instructions(pytest_cmd(side == "plugin"), tiny, env, out=path)
    bare, plugin = inclusive(files["bare"]), inclusive(files["plugin"])
    imported = (instructions([sys.executable, "-c", f"import pytest, {PLUGIN}"], tmp, env)
                - instructions([sys.executable, "-c", "import pytest"], tmp, env))
    print("\nwhere the fixed instructions go:")
    for what, n in (("importing the plugin (import pytest, then the plugin, less import pytest)", imported),
                    ("detection (the figure above)", detect),
                    ("the rest: options, configure, pytest registering the plugin's hooks and fixtures, collection "
                     "hooks, header and summary", fixed - imported - detect)):
        print(f"  {n / 1e6:8.1f} M  {ms(n, rate):6.2f} ms  {what}")
    print("  of the whole, by the interpreter's C functions (inclusive, -p plugin minus bare, one-test suite):")
    for name, what in WHERE:
        added = plugin.get(name, 0) - bare.get(name, 0)
        print(f"  {added / 1e6:8.1f} M  {ms(added, rate):6.2f} ms  {name}: {what}")


#: a plugin that, once collection is done, times the plugin's per-test hooks again over every collected test
HOOKS = "gpuenv_bench_hooks"
HOOKS_SOURCE = '''"""Time pytest-gpuenv's per-test hooks over the collected tests (benchmarks/overhead.py --where)."""
import time

import pytest
from _pytest.python import FunctionDefinition, Metafunc
from _pytest.reports import TestReport


def best(run, rounds=20):
    times = []
    for _ in range(rounds):
        start = time.process_time()
        run()
        times.append(time.process_time() - start)
    return min(times)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    import pytest_gpuenv.plugin as plugin

    config, items = session.config, session.items
    pm = config.pluginmanager
    metafuncs = []
    for item in items:
        definition = FunctionDefinition.from_parent(item.parent, name=item.originalname, callobj=item.obj)
        metafuncs.append(Metafunc(definition, item._fixtureinfo, config, module=item.module, _ispytest=True))
    generate = best(lambda: [plugin.pytest_generate_tests(m) for m in metafuncs])
    collect = best(lambda: plugin.pytest_collection_modifyitems(session, config, items))
    reports = [TestReport(i.nodeid, i.location, {}, "passed", None, when)
               for i in items for when in ("setup", "call", "teardown")]
    quiet = [p for p in (pm.get_plugin(n) for n in ("terminalreporter", "junitxml")) if p is not None]  # (they print)
    with_ours = pm.subset_hook_caller("pytest_runtest_logreport", quiet)
    without = pm.subset_hook_caller("pytest_runtest_logreport", [*quiet, pm.get_plugin("gpuenv-skips")])
    log_with = best(lambda: [with_ours(report=r) for r in reports])
    log_without = best(lambda: [without(report=r) for r in reports])
    n = len(items)
    print(f"GPUENV-HOOKS {generate / n} {collect / n} {(log_with - log_without) / n}")
'''


def where_per_test(suite: str, env: dict[str, str], rate: float, per_test: float) -> None:
    """Where the per-test cost goes: the plugin's per-test hooks timed again in one process (HOOKS)."""
    cmd = [sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider", "-p", PLUGIN, "-p", HOOKS]
    r = subprocess.run(cmd, cwd=suite, env=env, capture_output=True, text=True, timeout=600)
    m = re.search(r"GPUENV-HOOKS (\S+) (\S+) (\S+)", r.stdout)
    if m is None:
        raise SystemExit(f"failed ({' '.join(cmd)}):\n{(r.stdout + r.stderr)[-2000:]}")
    parts = [float(x) * 1e6 for x in m.groups()]
    print("\nwhere the per-test cost goes (each hook run again over every test of the largest suite, in one process, "
          "warm: the best of 20 rounds, CPU time per test):")
    for us, what in zip(parts, ("pytest_generate_tests (the test function's gpu_dtypes, hip_kernel, torch_device)",
                                "pytest_collection_modifyitems (marks, the gate, gpu_dtypes' capabilities)",
                                "pytest_runtest_logreport, three reports (with the plugin's reporter less without)")):
        print(f"  {us:6.2f} us  {what}")
    print(f"  {sum(parts):6.2f} us  together, against the slope's {ms(per_test, rate) * 1e3:.2f} us (its instructions at "
          "the process's average rate; the hooks' first runs, unspecialised and with cold caches, and what the "
          "plugin's objects cost pytest's own work make the difference)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tests", default="50,1300",
                    help="the suite sizes of the per-test slope, two or more (default 50,1300)")
    ap.add_argument("--seeds", default="0", help="hash seeds of the per-test runs; with several, the figure is their "
                    "mean (default 0)")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                    help="callgrind processes of the per-test suites run at once (default 2)")
    ap.add_argument("--calibrate", type=int, default=7, help="native runs that measure instructions per second")
    ap.add_argument("--where", action="store_true", help="also show where the fixed and the per-test instructions go")
    args = ap.parse_args()
    sizes = sorted({int(x) for x in args.tests.split(",")})
    if len(sizes) < 2 or sizes[0] < 1:
        raise SystemExit(f"--tests: two or more sizes of at least 1 test, got {args.tests!r}")
    seeds = [int(x) for x in args.seeds.split(",")]
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    with tempfile.TemporaryDirectory() as tmp:
        modules = os.path.join(tmp, "modules")
        os.makedirs(modules)
        with open(os.path.join(modules, f"{EMPTY}.py"), "w") as fh:
            fh.write('"""An empty plugin: what naming a plugin with -p costs pytest itself."""\n')
        with open(os.path.join(modules, f"{NOGC}.py"), "w") as fh:
            fh.write('"""The automatic garbage collector off, from this import on."""\nimport gc\n\ngc.disable()\n')
        with open(os.path.join(modules, f"{HOOKS}.py"), "w") as fh:
            fh.write(HOOKS_SOURCE)
        with open(os.path.join(modules, f"{IMPORTED}.py"), "w") as fh:
            fh.write(f'"""The plugin\'s modules loaded, none of its hooks registered."""\nimport {PLUGIN}  # noqa: F401\n')
        env = bench_env(os.path.join(tmp, "pyc"), modules)
        suites = {n: os.path.join(tmp, f"suite{n}") for n in {1, *sizes}}
        for n, path in suites.items():
            make_suite(path, n)
        counts = {(1, plugin): instructions(pytest_cmd(plugin), suites[1], env) for plugin in (False, True)}
        def per_test_run(key: tuple[int, int, str]) -> int:
            seed, n, side = key
            cmd = pytest_cmd(side == "plugin", nogc=True, imported=side == "imported")
            return instructions(cmd, suites[n], dict(env, PYTHONHASHSEED=str(seed)))

        keys = [(seed, n, side) for seed in seeds for n in sizes for side in ("bare", "plugin", "imported")]
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            nogc_runs = dict(zip(keys, pool.map(per_test_run, keys)))
        #: each size's instructions on either side, the mean over the seeds
        nogc = {(n, plugin): sum(nogc_runs[(seed, n, "plugin" if plugin else "bare")] for seed in seeds) / len(seeds)
                for n in sizes for plugin in (False, True)}
        detect_code = "import pytest_gpuenv.detect as d"
        d0 = instructions([sys.executable, "-c", detect_code], tmp, env)
        d1 = instructions([sys.executable, "-c", detect_code + "; d.detect()"], tmp, env)
        # detection that asked NVML (an NVIDIA driver here) has the NVML goal
        nvml = subprocess.run([sys.executable, "-c", detect_code + "; d.detect(); import sys; print('pynvml' in sys.modules)"],
                              env=env, capture_output=True, text=True, timeout=120).stdout.strip().endswith("True")
        cpu = min(native(pytest_cmd(True), suites[1], env) for _ in range(max(1, args.calibrate)))
        rate = counts[(1, True)] / cpu

        lookup = counts[(1, False)] - instructions(pytest_cmd(None), suites[1], env)
        print("instructions of a whole `pytest -q` process under callgrind (autoload off, bytecode cached):")
        print(f"  {'suite':<12} {'-p ' + EMPTY:>24} {'-p ' + PLUGIN:>26} {'added':>10}")
        added = {}
        for n, runs, note in [(1, counts, "")] + [(n, nogc, ", gc off") for n in sizes]:
            added[n] = runs[(n, True)] - runs[(n, False)]
            print(f"  {f'{n} test' + ('s' if n > 1 else '') + note:<20} {runs[(n, False)] / 1e6:15.1f}M "
                  f"{runs[(n, True)] / 1e6:25.1f}M {added[n] / 1e6:9.1f}M")
        print(f"-p lookup (pytest's, on both sides; a run with autoloading on makes it with or without the plugin): "
              f"{lookup / 1e6:.1f} M instructions = {ms(lookup, rate):.1f} ms")
        print(f"machine rate: {rate / 1e9:.2f} G instructions/s (the one-test -p {PLUGIN} process: "
              f"{counts[(1, True)] / 1e6:.1f} M instructions / {cpu * 1e3:.0f} ms user CPU, the least of "
              f"{max(1, args.calibrate)} native runs)")
        by_seed = {seed: slope({n: nogc_runs[(seed, n, "plugin")] - nogc_runs[(seed, n, "bare")] for n in sizes})[0]
                   for seed in seeds}
        per_test, off_line = slope({n: added[n] for n in sizes})
        fixed = added[1] - per_test
        detect = d1 - d0
        goal_detect = GOAL_DETECT_NVML_MS if nvml else GOAL_DETECT_MS
        print(f"fixed cost (import, configure with detection, collection hooks, header and summary): "
              f"{fixed / 1e6:.1f} M instructions = {ms(fixed, rate):.1f} ms; goal <= {GOAL_FIXED_MS:g} ms: "
              f"{verdict(ms(fixed, rate), GOAL_FIXED_MS)}")
        between = (f"between {sizes[0]} and {sizes[1]} tests" if len(sizes) == 2 else
                   f"least squares over {', '.join(map(str, sizes))} tests")
        seeded = f"hash seed {seeds[0]}" if len(seeds) == 1 else f"the mean over hash seeds {args.seeds}"
        print(f"per test (slope {between}, the automatic garbage collector off, {seeded}): {per_test / 1e3:.1f} k "
              f"instructions = {ms(per_test, rate) * 1e3:.1f} us; goal <= {GOAL_PER_TEST_US:g} us: "
              f"{verdict(ms(per_test, rate) * 1e3, GOAL_PER_TEST_US)}")
        hooks_by_seed = {seed: slope({n: nogc_runs[(seed, n, "plugin")] - nogc_runs[(seed, n, "imported")]
                                      for n in sizes})[0] for seed in seeds}
        if len(seeds) > 1:
            print("  by hash seed: " + ", ".join(f"{seed}: {b / 1e3:.1f} k (hooks {hooks_by_seed[seed] / 1e3:.1f} k)"
                                                 for seed, b in by_seed.items()))
        hooks = sum(hooks_by_seed.values()) / len(seeds)
        print(f"  of which the plugin's hooks (the slope against a bare side that imports the plugin's modules): "
              f"{hooks / 1e3:.1f} k; the rest, {(per_test - hooks) / 1e3:.1f} k, is pytest's own work made slower by "
              f"the code loaded (the split moves with the layout, as the figure does: see --seeds)")
        if len(sizes) > 2:
            print(f"  (the largest distance of a size's added instructions from the line: {off_line / 1e3:.1f} k)")
        print(f"detection (first detect() in a fresh process, on this machine): {detect / 1e6:.1f} M instructions = "
              f"{ms(detect, rate):.1f} ms; goal <= {goal_detect:g} ms ({'with NVML' if nvml else 'CPU'}): "
              f"{verdict(ms(detect, rate), goal_detect)}")
        if args.where:
            where(tmp, suites[1], env, rate, fixed, detect)
            where_per_test(suites[sizes[-1]], env, rate, per_test)


if __name__ == "__main__":
    main()
