"""Packaging: ``gpuenv --version``, the sdist/wheel check (scripts/check-dist.sh) and the README's install
commands (a venv, so they work under PEP 668 as on a stock Debian 12)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
from _checkout import REPO

import pytest_gpuenv
from pytest_gpuenv import cli

CHECK_DIST = os.path.join(REPO, "scripts", "check-dist.sh")


def test_gpuenv_version(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out == f"pytest-gpuenv {pytest_gpuenv.__version__}\n"


def test_python_m_version():
    p = subprocess.run([sys.executable, "-m", "pytest_gpuenv", "--version"], capture_output=True, text=True,
                       timeout=60, cwd=REPO)
    assert (p.returncode, p.stdout) == (0, f"pytest-gpuenv {pytest_gpuenv.__version__}\n"), p.stderr


def _copy_project(dst) -> str:
    """The files a build reads, without .git (check-dist.sh then lists the package by walking it)."""
    os.makedirs(os.path.join(dst, "scripts"))
    for name in ("pyproject.toml", "README.md", os.path.join("scripts", "check-dist.sh")):
        shutil.copy(os.path.join(REPO, name), os.path.join(dst, name))
    shutil.copytree(os.path.join(REPO, "pytest_gpuenv"), os.path.join(dst, "pytest_gpuenv"),
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
    return str(dst)


def _check_dist(project: str, out) -> subprocess.CompletedProcess:
    pytest.importorskip("build")
    pytest.importorskip("twine")
    env = {**os.environ, "PYTHON": sys.executable}
    return subprocess.run(["bash", os.path.join(project, "scripts", "check-dist.sh"), "--no-isolation", "--no-venv",
                           str(out)], capture_output=True, text=True, timeout=300, env=env, cwd=project)


@pytest.mark.slow
def test_check_dist_builds_a_complete_wheel(tmp_path):
    """The sdist and the wheel pass twine check and carry every package file (headers, C++ sources,
    py.typed); the clean-venv install (step 3) runs in CI (.ci/run)."""
    project = _copy_project(tmp_path / "src")
    p = _check_dist(project, tmp_path / "out")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "PASSED" in p.stdout and "check-dist: OK" in p.stdout
    version = pytest_gpuenv.__version__
    assert sorted(os.listdir(tmp_path / "out")) == [f"pytest_gpuenv-{version}-py3-none-any.whl",
                                                    f"pytest_gpuenv-{version}.tar.gz"]


@pytest.mark.slow
def test_check_dist_names_a_file_left_out_of_package_data(tmp_path):
    project = _copy_project(tmp_path / "src")
    pyproject = os.path.join(project, "pyproject.toml")
    with open(pyproject) as f:
        text = f.read()
    assert '"src/*.cpp", ' in text
    with open(pyproject, "w") as f:
        f.write(text.replace('"src/*.cpp", ', ""))
    p = _check_dist(project, tmp_path / "out")
    assert p.returncode == 1
    assert "check-dist: missing from the wheel: pytest_gpuenv/runtime/cpu/src/barrier.cpp" in p.stderr
    assert not (tmp_path / "out").exists()


def _readme_commands() -> list[str]:
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        text = f.read()
    block = re.search(r"```sh\n(.*?)```", text, re.S)
    assert block, "README has no sh block"
    return [line for line in block.group(1).splitlines() if line and not line.startswith("#")]


def test_readme_install_commands_use_a_venv():
    """PEP 668: on a stock Debian 12 the system python3 refuses `pip install`; the README's two commands
    create .venv and run everything from it (checked for real on Debian's python3, see CHANGELOG)."""
    install, tests = _readme_commands()
    apt = install.split("&&")[1].split()
    assert apt[:3] == ["apt-get", "install", "-y"]
    assert {"python3-venv", "hipcc", "libamdhip64-dev", "rocminfo", "rocm-smi", "g++"} <= set(apt)
    assert "python3 -m venv .venv" in install
    assert "python3 -m pip" not in install and " pip install" not in install
    assert ".venv/bin/pip install --index-url https://download.pytorch.org/whl/cpu 'torch==2.13.0'" in install
    assert install.endswith(".venv/bin/gpuenv info && .venv/bin/python -m pytest -p gpuenv examples -v -rs")
    assert tests == ".venv/bin/python -m pytest -n 2 -rs"


def test_ci_runs_the_dist_check_and_keeps_the_torch_pin():
    with open(os.path.join(REPO, ".ci", "run")) as f:
        ci = f.read()
    assert "scripts/check-dist.sh" in ci
    assert "'torch==2.13.0'" in ci
    assert "python3 -m venv .venv" in ci
