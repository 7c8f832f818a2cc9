"""The documentation site (docs/): its code examples run, and its generated reference covers the code.

A fenced block whose first line names a file (``# test_first.py``, ``# pytest.ini``, ``// kernels/x.hip``, ``// kernels/x.cu``)
is written to a pytester folder with the other such blocks of its page, and the page's tests run there in a
subprocess with ``-p gpuenv --gpuenv-backend=cpu`` (the same result on any machine); ``(expect: failed=1,
passed=1)`` after the name gives that file's outcomes, else its tests run and none fails or errors. Blocks without a file name
are illustrations (output, shell lines, fragments) and are not run. The Sphinx build itself runs in CI
(``.ci/run``, ``tox -e docs``) with warnings as errors.
"""

from __future__ import annotations

import importlib.util
import pathlib
import re

import pytest
from _checkout import REPO
from _roots import scenario_env

from pytest_gpuenv.detect import detect

DOCS = pathlib.Path(REPO, "docs")
PAGES = sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts and p.parent.name != "reference")
_BLOCK = re.compile(r"^```[a-z]*\n(?:#|//) (?P<file>[\w./-]+\.(?:py|ini|toml|hip|cu|cfg))"
                    r"(?: \(expect: (?P<expect>[^)]*)\))?\n(?P<body>.*?)^```", re.M | re.S)
_NEEDS_TORCH = re.compile(r"^(?:import torch|torch = pytest\.importorskip)", re.M)


def _reference() -> object:
    spec = importlib.util.spec_from_file_location("gpuenv_reference", DOCS / "_ext" / "gpuenv_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _blocks(page: pathlib.Path) -> list[re.Match[str]]:
    return list(_BLOCK.finditer(page.read_text(encoding="utf-8")))


#: pages whose examples build and run kernels on the CPU executor, a minute of CPU between them: slow (the other
#: pages' examples, getting-started's kernel among them, run in the default set)
SLOW_PAGES = {"how-to/laptop.md", "how-to/cuda-kernels.md"}


@pytest.mark.parametrize("page", [pytest.param(p, marks=pytest.mark.slow)
                                  if p.relative_to(DOCS).as_posix() in SLOW_PAGES else p
                                  for p in PAGES if _blocks(p)], ids=lambda p: p.relative_to(DOCS).as_posix())
def test_examples_run(page: pathlib.Path, pytester: pytest.Pytester) -> None:
    expect: dict[str, dict[str, int]] = {}
    for block in _blocks(page):
        path = pytester.path / block["file"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(block["body"], encoding="utf-8")
        if path.name.startswith("test_"):
            parts = [p.partition("=") for p in (block["expect"] or "").split(",") if p.strip()]
            expect[block["file"]] = {k.strip(): int(v) for k, _, v in parts}
    if not expect:
        pytest.skip("no test file among the page's examples")
    if any(block["expect"] and _NEEDS_TORCH.search(block["body"]) for block in _blocks(page)):
        pytest.importorskip("torch")  # the outcomes the page gives are those of a machine with torch
    result = pytester.runpytest_subprocess("-p", "gpuenv", "--gpuenv-backend=cpu", "-rA", "-p", "no:cacheprovider")
    seen: dict[str, dict[str, int]] = {name: {} for name in expect}
    for outcome, name in re.findall(r"^(PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS) (?:\[\d+\] )?([\w./-]+\.py)",
                                    result.stdout.str(), re.M):
        counts = seen.setdefault(name, {})
        counts[outcome.lower()] = counts.get(outcome.lower(), 0) + 1
    for name, want in expect.items():
        got = seen[name]
        if want:
            assert {k: got.get(k, 0) for k in want} == want, (name, result.stdout.str())
        else:
            assert got and not got.get("failed") and not got.get("error"), (name, result.stdout.str())


def test_reference_pages_generate(tmp_path: pathlib.Path) -> None:
    """Every page builds from the code's tables, and names what a real run registers."""
    ref = _reference()
    written = ref.write_pages(tmp_path)  # type: ignore[attr-defined]
    text = {p.stem: p.read_text(encoding="utf-8") for p in written}
    assert set(text) == {"options", "markers", "fixtures", "cli", "problems", "python-api"}
    for flag in ("--gpuenv-backend=auto\\|cpu", "--gpuenv-require=", "--gpuenv-plan-profile=SPEC"):
        assert f"`{flag}" in text["options"]
    assert "`GPUENV_BACKEND`" in text["options"] and "`gpuenv_kernel_dirs` (paths)" in text["options"]
    for variable in ("GPUENV_CPU_WORKERS", "GPUENV_CPU_WATCHDOG", "GPUENV_LOCK_DIR"):  # not options, listed too
        assert f"| `{variable}` |" in text["options"]
    assert "`requires_memory(size)` | `gpuenv_requires_memory`" in text["markers"]
    for name in ("gpu_env", "gpu_device", "torch_device", "hip_kernel", "gpu_bench"):
        assert f"`{name}`" in text["fixtures"]
    assert "`gpu_dtypes(*dtypes, fp64_full=False)`" in text["markers"] and "`gpu_expected`" in text["fixtures"]
    assert "`--gpuenv-quarantine=FILE`" in text["options"]
    for command in ("gpuenv info", "gpuenv doctor", "gpuenv compile", "gpuenv perf compare", "gpuenv quarantine check"):
        assert f"## `{command}`" in text["cli"]


def test_fixtures_page_lists_every_hip_kernel_option(pytester: pytest.Pytester) -> None:
    """Every option ``hip_kernel`` takes has a row (``lockstep``, ``dialect``, ``check``: unchecked launches
    through the fixture), and the options the page says it takes are those ``hip_kernel`` names when given one
    it does not take."""
    ref = _reference()
    rows = {name: doc for name, _, doc in ref.hip_kernel_options()}  # type: ignore[attr-defined]
    assert {"lockstep", "dialect", "check", "target", "rocm_version"} <= set(rows), rows
    assert "unchecked" in rows["check"], rows["check"]
    page = "\n".join(ref.fixtures_page())  # type: ignore[attr-defined]
    assert "| `lockstep` |" in page and "| `dialect` |" in page and "| `check` | `True` |" in page
    pytester.makepyfile("def test_k(hip_kernel):\n    hip_kernel('x.hip', 'k', no_such_option=1)\n")
    out = pytester.runpytest("--gpuenv-backend=cpu", "--gpuenv-kernels=off").stdout.str()
    said = re.search(r"unexpected options \['no_such_option'\]; expected ([a-z_, ]+)", out)
    assert said is not None, out
    assert set(said.group(1).split(", ")) == set(rows)


def test_problem_codes_cover_what_detection_reports(gpu_roots: pathlib.Path) -> None:
    """The source scan finds every problem code that detection reports on the machine trees (read
    unmaterialised, as root: enough to produce the codes)."""
    import pytest_gpuenv

    rows = _reference().problem_rows(pathlib.Path(pytest_gpuenv.__file__).parent)  # type: ignore[attr-defined]
    assert "kfd-permission-denied" in rows and rows["kfd-permission-denied"]["severity"] == "error"
    reported = set()
    for scenario in sorted(p for p in gpu_roots.iterdir() if (p / "_meta").is_dir()):
        env = detect(root=str(scenario), environ=scenario_env(scenario), probe="never")
        reported |= {p.code for p in env.problems}
    assert len(reported) >= 5
    assert reported <= set(rows), sorted(reported - set(rows))


def test_names_in_the_pages_exist() -> None:
    """Every ``--gpuenv-*`` option the hand-written pages name is one pytest registers, and every ``GPUENV_*``
    variable and ``gpuenv_*`` name (ini option, marker alias, report field) occurs in the package's source."""
    import pytest_gpuenv
    from pytest_gpuenv.session.options import add_options

    parser = pytest.Parser(_ispytest=True)
    add_options(parser)
    flags = {name for group in parser._groups for opt in group.options for name in opt.names()}
    source = "\n".join(p.read_text(encoding="utf-8") for p in pathlib.Path(pytest_gpuenv.__file__).parent.rglob("*")
                       if p.suffix in (".py", ".cpp", ".h"))
    text = "\n".join(p.read_text(encoding="utf-8") for p in PAGES)
    unknown_flags = sorted(set(re.findall(r"--gpuenv-[a-z-]*[a-z]", text)) - flags)
    unknown_names = sorted(n for n in set(re.findall(r"\b(?:GPUENV_[A-Z_]*[A-Z]|gpuenv_[a-z_]*[a-z])\b", text))
                           if n not in source and n != "GPUENV_TEST_ROOTS")  # the tests' own variable
    assert not unknown_flags and not unknown_names, (unknown_flags, unknown_names)


def test_pages_write_option_values_with_equals() -> None:
    """``--gpuenv-cache-dir=PATH``, never ``--gpuenv-cache-dir PATH``: pytest chooses the rootdir before it knows
    the plugin's options, and takes a separate value that is an existing path for a test path."""
    from pytest_gpuenv.session.options import OPTIONS

    takes_value = "|".join(re.escape(o.flag) for o in OPTIONS
                           if o.cli and (o.argparse or {}).get("action") not in ("store_true", "store_false"))
    spaced = re.compile(rf"(?:{takes_value}) (?!value\b|from\b|is\b)[^\s`|'-]")
    found = [f"{page.name}: {m.group(0)}" for page in [*PAGES, pathlib.Path(REPO, "README.md")]
             for m in spaced.finditer(page.read_text(encoding="utf-8"))]
    assert not found, found


@pytest.mark.slow  # collects the whole suite twice
def test_readme_test_counts_are_the_suites() -> None:
    """The README's default set, slow set and full set are what pytest collects (the figures beside them were
    measured on that suite: re-measure them when these counts move)."""
    import subprocess
    import sys

    readme = pathlib.Path(REPO, "README.md").read_text(encoding="utf-8")
    said = re.search(r"The default set \(([\d,]+) tests\) leaves out ([\d,]+) slow tests.*?\(([\d,]+) tests\)", readme,
                     re.S)
    assert said is not None, "README.md does not give the default set's size"
    default, slow, full = (int(n.replace(",", "")) for n in said.groups())

    def collected(*args: str) -> int:
        out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                             cwd=REPO, capture_output=True, text=True, timeout=600).stdout
        found = re.search(r"^(\d+)(?:/\d+)? tests? collected", out, re.M)
        assert found is not None, out[-2000:]
        return int(found.group(1))

    assert (default, full) == (collected(), collected("-m", "slow or not slow")) and slow == full - default
