"""The CI templates in examples/ci/ (GitHub Actions workflows, a tox.ini and a noxfile) are valid and use
only what exists: the workflows have GitHub Actions' shape; every ``gpuenv`` command parses with the CLI's
own parsers; every ``--gpuenv-*`` option is one the plugin registers; every ``pytest`` command collects the
example suite's perf module (``--collect-only``; it imports no torch, so a run costs about a second) with
its options, on the runner it is meant for (``--gpuenv-root`` with a machine tree from tests/data)."""

from __future__ import annotations

import ast
import configparser
import glob
import os
import re
import shlex
import subprocess
import sys

import pytest
from _checkout import GPU_ROOTS, REPO

from pytest_gpuenv import cli
from pytest_gpuenv.rtc import _cli as compile_cli

yaml = pytest.importorskip("yaml")

CI = os.path.join(REPO, "examples", "ci")
WORKFLOWS = sorted(glob.glob(os.path.join(CI, "*.yml")))
#: the machine tree a run that requires this backend is collected on
RUNNER_ROOT = {"cuda": "h100_linux", "gpu": "h100_linux", "rocm": "mi300x_linux"}
EXAMPLE = os.path.join(REPO, "examples", "test_perf_example.py")
SHELL_OPS = {"&&", "||", ";", "|", "(", ")", "&"}
#: the checkout's package first, whatever is installed
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")]))}


def _load(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def _workflow_runs() -> list[tuple[str, str]]:
    out = []
    for path in WORKFLOWS:
        for job in _load(path)["jobs"].values():
            out += [(os.path.basename(path), step["run"]) for step in job["steps"] if "run" in step]
    return out


def _tox_commands() -> list[tuple[str, str]]:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(os.path.join(CI, "tox.ini"))
    return [(f"tox.ini [{name}]", parser[name]["commands"]) for name in parser.sections() if "commands" in parser[name]]


def _nox_commands() -> list[tuple[str, str]]:
    """``session.run(...)`` calls of the noxfile, their literal arguments quoted as a shell line."""
    with open(os.path.join(CI, "noxfile.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "run":
            words = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            out.append(("noxfile.py", shlex.join(words)))
    return out


def _all_commands() -> list[tuple[str, str]]:
    return _workflow_runs() + _tox_commands() + _nox_commands()


def _simple_commands(script: str) -> list[list[str]]:
    """The simple commands of a shell script: split at lines (after continuations), operators and
    ``do``; tox's ``{posargs}`` dropped; comments removed."""
    out = []
    for line in script.replace("\\\n", " ").splitlines():
        lex = shlex.shlex(line, posix=True, punctuation_chars=True)
        lex.whitespace_split = True
        words: list[str] = []
        for tok in [*lex, ";"]:
            if tok in SHELL_OPS or tok == "do":
                if words and words[0] not in ("for", "done"):
                    out.append(words)
                words = []
            elif tok != "{posargs}":
                words.append(tok)
    return out


def _invocations(kind: str) -> list[tuple[str, list[str]]]:
    """(where, arguments) of every ``gpuenv`` (kind "gpuenv") or ``pytest`` (kind "pytest") command."""
    found = []
    for where, script in _all_commands():
        for words in _simple_commands(script):
            prog = os.path.basename(words[0])
            if prog.startswith("python") and words[1:3] in (["-m", "pytest"], ["-m", "pytest_gpuenv"]):
                prog, args = ("pytest" if words[2] == "pytest" else "gpuenv"), words[2:]
            else:
                args = words
            if prog == kind:
                found.append((where, args[1:]))
    return found


@pytest.fixture(scope="module")
def plugin_options(tmp_path_factory) -> set[str]:
    """Every ``--gpuenv-*`` option that ``pytest -p gpuenv --help`` lists."""
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "gpuenv", "--help"], capture_output=True, text=True,
                       timeout=120, cwd=tmp_path_factory.mktemp("help"), env=ENV)
    assert p.returncode == 0, p.stderr
    return set(re.findall(r"(--gpuenv-[a-z0-9-]+)", p.stdout))


def test_templates_are_there():
    assert [os.path.basename(p) for p in WORKFLOWS] == ["github-amd-rocm.yml", "github-cpu.yml", "github-nvidia.yml",
                                                       "github-release.yml"]
    for name in ("tox.ini", "noxfile.py"):
        assert os.path.isfile(os.path.join(CI, name))


@pytest.mark.parametrize("path", WORKFLOWS, ids=os.path.basename)
def test_workflow_has_github_actions_shape(path):
    wf = _load(path)
    assert isinstance(wf.get("name"), str)
    # YAML 1.1 reads the key `on` as True
    trigger = wf.get("on", wf.get(True))
    assert trigger and set(trigger) <= {"push", "pull_request", "workflow_dispatch", "schedule"}, trigger
    assert wf["jobs"]
    for name, job in wf["jobs"].items():
        assert set(job) <= {"runs-on", "timeout-minutes", "container", "steps", "env", "if", "needs",
                            "concurrency", "strategy", "permissions", "environment"}, name
        assert job.get("needs", next(iter(wf["jobs"]))) in wf["jobs"], name
        runs_on = job["runs-on"]
        assert isinstance(runs_on, str) or (isinstance(runs_on, list) and all(isinstance(x, str) for x in runs_on))
        assert job["steps"]
        for step in job["steps"]:
            assert set(step) <= {"name", "uses", "with", "run", "if", "env", "shell"}, step
            assert ("uses" in step) != ("run" in step), step
            if "uses" in step:
                assert re.fullmatch(r"actions/[a-z-]+(/[a-z]+)?@v\d+|pypa/gh-action-pypi-publish@release/v1",
                                    step["uses"]), step["uses"]
            else:
                assert isinstance(step["run"], str) and step["run"].strip()


def test_amd_template_runs_in_a_rocm_container_with_the_gpu_passed_in():
    job = _load(os.path.join(CI, "github-amd-rocm.yml"))["jobs"]["rocm"]
    assert job["container"]["image"].startswith("rocm/pytorch:")
    options = job["container"]["options"].split()
    for flag, value in (("--device", "/dev/kfd"), ("--device", "/dev/dri"), ("--group-add", "video"),
                        ("--group-add", "render"), ("--security-opt", "seccomp=unconfined")):
        assert any(options[i:i + 2] == [flag, value] for i in range(len(options))), (flag, value)


def test_amd_template_pins_the_bindings_to_the_image_rocm():
    """hip-python and amdsmi follow ROCm's versions: unpinned they resolve to another ROCm's (7.x) in a 6.2 image."""
    job = _load(os.path.join(CI, "github-amd-rocm.yml"))["jobs"]["rocm"]
    rocm = re.search(r":rocm(\d+)\.(\d+)", job["container"]["image"])
    assert rocm, job["container"]["image"]
    install = " ".join(s["run"] for s in job["steps"] if "pip install" in s.get("run", ""))
    for binding in ("hip-python", "amdsmi"):
        assert f'"{binding}=={rocm[1]}.{rocm[2]}.*"' in install, (binding, install)


def test_install_lines_work_today_and_the_package_index_is_the_labelled_default():
    """No template installs from a repository that does not exist: the plugin comes from PYTEST_GPUENV (a
    checkout or a wheel today), whose default is the package index's name, labelled as not published yet."""
    for path in [*WORKFLOWS, os.path.join(CI, "tox.ini"), os.path.join(CI, "noxfile.py")]:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        assert "git+https" not in text and "OWNER" not in text, path
        flat = " ".join(text.replace("#", " ").split())
        if not path.endswith("github-release.yml"):
            assert "PYTEST_GPUENV" in text and ("not on PyPI yet" in flat or "not on a package index" in flat), path


def test_no_environment_downloads_the_cuda_torch_by_default():
    """tox's and nox's environments look in PyTorch's CPU index (TORCH_INDEX_URL) besides PyPI, so pip takes the
    CPU build where a project needs torch, unless a GPU runner names its own index."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(os.path.join(CI, "tox.ini"))
    assert "PIP_EXTRA_INDEX_URL = {env:TORCH_INDEX_URL:https://download.pytorch.org/whl/cpu}" in parser["testenv"]["set_env"]
    assert all("set_env" not in parser[s] for s in parser.sections() if s.startswith("testenv:")), "set_env overridden"
    with open(os.path.join(CI, "noxfile.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    installs = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "install"]
    assert len(installs) == 4
    for call in installs:
        assert isinstance(call.args[0], ast.Starred) and call.args[0].value.id == "TORCH_INDEX", ast.unparse(call)


def test_release_template_builds_checks_and_publishes_with_trusted_publishing():
    wf = _load(os.path.join(CI, "github-release.yml"))
    assert wf.get("on", wf.get(True)) == {"push": {"tags": ["v*"]}}
    build, publish = wf["jobs"]["build"], wf["jobs"]["publish"]
    script = " ".join(s.get("run", "") for s in build["steps"])
    assert "scripts/check-dist.sh" in script and "__version__" in script  # build, twine check, contents, clean venv
    with open(os.path.join(REPO, "scripts", "check-dist.sh"), encoding="utf-8") as f:
        assert "twine check --strict" in f.read()
    assert publish["needs"] == "build" and publish["permissions"] == {"id-token": "write"}
    assert publish["environment"] == "pypi"
    assert publish["steps"][-1] == {"uses": "pypa/gh-action-pypi-publish@release/v1"}  # no password: OIDC


def test_baselines_are_cached_between_nvidia_runs():
    steps = _load(os.path.join(CI, "github-nvidia.yml"))["jobs"]["nvidia"]["steps"]
    uses = {s.get("uses", "").split("@")[0]: s for s in steps}
    assert uses["actions/cache/restore"]["with"]["path"] == uses["actions/cache/save"]["with"]["path"]
    assert uses["actions/cache/save"]["with"]["path"] == ".gpuenv/baselines.json"


def test_simple_commands_split_like_a_shell():
    script = 'for f in k/*.hip; do gpuenv compile "$f" --arch a,b; done\nx && .venv/bin/gpuenv info # c\n'
    assert _simple_commands(script) == [["gpuenv", "compile", "$f", "--arch", "a,b"], ["x"], [".venv/bin/gpuenv", "info"]]


def test_every_gpuenv_command_parses():
    calls = _invocations("gpuenv")
    assert {args[0] for _, args in calls} >= {"info", "compile"}
    for where, args in calls:
        try:
            if args[0] == "compile":
                compile_cli._parser().parse_args(args[1:])
            else:
                assert args[0] in ("info", "doctor", "--version"), (where, args)
                cli._parser().parse_args(args)
        except SystemExit as e:  # argparse's error exit
            pytest.fail(f"{where}: gpuenv {shlex.join(args)} does not parse ({e})")


def test_every_gpuenv_option_exists(plugin_options):
    assert "--gpuenv-backend" in plugin_options  # the help was read
    used = {(where, w.split("=")[0]) for where, args in _invocations("pytest") for w in args if w.startswith("--gpuenv-")}
    assert {opt for _, opt in used} >= {"--gpuenv-require", "--gpuenv-compile-archs", "--gpuenv-perf"}
    unknown = sorted(f"{where}: {opt}" for where, opt in used if opt not in plugin_options)
    assert not unknown


def _collect_args(args: list[str], tmp) -> list[str]:
    """The template's pytest arguments for ``--collect-only`` on the perf example: without xdist's
    ``-n`` (collection is the same), with tox's ``{env_tmp_dir}`` in tmp and the runner's machine tree."""
    out: list[str] = []
    it = iter(args)
    for w in it:
        if w == "-n":
            next(it)
        elif not w.startswith("-n"):
            out.append(w.replace("{env_tmp_dir}", str(tmp)))
    required = [w.split("=", 1)[1] for w in args if w.startswith("--gpuenv-require=")]
    if required and required[0] in RUNNER_ROOT:
        out.append(f"--gpuenv-root={os.path.join(GPU_ROOTS, RUNNER_ROOT[required[0]])}")
    return [*out, "--collect-only", "-q", "-p", "no:cacheprovider", EXAMPLE]


@pytest.mark.slow
def test_every_pytest_command_collects_the_perf_example(tmp_path):
    runs = {tuple(_collect_args(args, tmp_path)): where for where, args in _invocations("pytest")}
    assert len(runs) >= 4
    for args, where in runs.items():
        p = _collect(list(args), tmp_path)
        assert p.returncode == 0, f"{where}: pytest {shlex.join(args)}\n{p.stdout[-3000:]}{p.stderr[-3000:]}"
        assert "test_perf_example.py::" in p.stdout and "error" not in p.stderr.lower(), p.stdout + p.stderr


def _collect(args: list[str], cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env=ENV)


@pytest.mark.parametrize("bad", ["--gpuenv-perf=fast", "--gpuenv-require=tpu"])
def test_a_bad_value_in_a_template_would_fail_the_collect_check(tmp_path, bad):
    p = _collect(_collect_args(["-p", "gpuenv", bad], tmp_path), tmp_path)
    assert p.returncode != 0 and bad.split("=")[1] in p.stderr, p.stdout + p.stderr


def test_docs_explain_each_template():
    with open(os.path.join(REPO, "docs", "how-to", "ci-templates.md"), encoding="utf-8") as f:
        section = f.read()
    for name in [*map(os.path.basename, WORKFLOWS), "tox.ini", "noxfile.py"]:
        assert f"examples/ci/{name}" in section, name
