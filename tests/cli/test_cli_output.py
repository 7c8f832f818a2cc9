"""The ``gpuenv`` command under hostile output, encodings and values.

``gpuenv info > /dev/full`` ends with one line, not a traceback; device names holding any bytes print
under a strict ASCII or UTF-8 stdout (with replacement characters); ``--probe-timeout`` has the plugin
option's bounds; an empty ``GPUENV_ROOT`` (or ``--root ''``) is unset, never the current directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _checkout import GPU_ROOTS, REPO
from _roots import materialize

from pytest_gpuenv.detect import PROBE_TIMEOUT_MAX

COMMANDS = [["info"], ["info", "--json"], ["doctor"]]


def gpuenv(*args: str, cwd=None, env=None, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    """``python -m pytest_gpuenv ARGS`` (the console script's entry point)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("GPUENV_")}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "pytest_gpuenv", *args], cwd=cwd, env=full_env, stdout=stdout,
                          stderr=subprocess.PIPE, timeout=120)


@pytest.fixture(scope="module")
def h100_root(tmp_path_factory) -> Path:
    """The h100_linux tree with bytes that are not UTF-8 in a device name and in a directory name."""
    if not GPU_ROOTS.is_dir():
        pytest.skip(f"file trees not found at {GPU_ROOTS}")
    root = materialize(GPU_ROOTS / "h100_linux", tmp_path_factory.mktemp("h100") / "root")
    gpus = root / "proc" / "driver" / "nvidia" / "gpus"
    for info in gpus.glob("*/information"):
        info.write_bytes(info.read_bytes().replace(b"NVIDIA H100", b"NVIDIA \xff\xfe H100"))
    os.mkdir(os.fsencode(gpus) + b"/0000:\xff")
    return root


# ------------------------------------------------------------------------------------------ /dev/full
@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_dev_full_is_one_line_and_exit_1(tmp_path, command):
    with open("/dev/full", "w") as full:
        r = gpuenv(*command, "--root", str(tmp_path), stdout=full)
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert err.strip().splitlines() == ["gpuenv: cannot write the output: No space left on device"]


def test_closed_pipe_is_quiet(tmp_path):
    p = subprocess.Popen([sys.executable, "-m", "pytest_gpuenv", "info", "--json", "--root", str(tmp_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # `gpuenv info | head -0`
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0
    assert b"Traceback" not in err and b"Exception ignored" not in err


# ----------------------------------------------------------------------------------- strict encodings
@pytest.mark.parametrize("encoding", ["ascii:strict", "utf-8:strict"])
@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_names_that_are_not_utf8_print_under_a_strict_encoding(h100_root, encoding, command):
    r = gpuenv(*command, "--root", str(h100_root), env={"PYTHONIOENCODING": encoding})
    err = r.stderr.decode()
    assert "Traceback" not in err
    assert r.returncode in (0, 1), err  # doctor: 1 when it lists a problem
    out = r.stdout.decode(encoding.split(":")[0])  # what was written is valid in that encoding
    if command == ["info"]:
        assert "H100 80GB HBM3" in out
        assert "NVIDIA ?" in out or "NVIDIA \ufffd" in out
    if command == ["info", "--json"]:
        names = {d["name"] for d in json.loads(out)["devices"]}
        assert names == {"NVIDIA \ufffd\ufffd H100 80GB HBM3"}


# ------------------------------------------------------------------------------------- --probe-timeout
BAD_TIMEOUTS = ["-5", "0", "-0", "inf", "-inf", "nan", "1e400", "9" * 400, str(PROBE_TIMEOUT_MAX + 1), "abc", ""]
GOOD_TIMEOUTS = ["0.5", "20", str(PROBE_TIMEOUT_MAX)]


@pytest.mark.parametrize("value", BAD_TIMEOUTS, ids=lambda v: v[:10] or "empty")
def test_cli_probe_timeout_out_of_range_is_an_argument_error(tmp_path, value):
    r = gpuenv("info", "--root", str(tmp_path), f"--probe-timeout={value}")
    err = r.stderr.decode()
    assert r.returncode == 2
    assert f"argument --probe-timeout: expected seconds in (0, {PROBE_TIMEOUT_MAX}]" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("value", BAD_TIMEOUTS[:-1] + GOOD_TIMEOUTS, ids=lambda v: v[:10])
def test_cli_and_plugin_share_the_probe_timeout_bounds(pytester, tmp_path, value):
    cli_ok = gpuenv("info", "--json", "--root", str(tmp_path), f"--probe-timeout={value}").returncode == 0
    pytester.makepyfile("def test_a(): pass")
    plugin_ok = pytester.runpytest(f"--gpuenv-probe-timeout={value}", f"--gpuenv-root={tmp_path}").ret == 0
    assert cli_ok == plugin_ok == (value in GOOD_TIMEOUTS)


# ----------------------------------------------------------------------------------------- empty root
@pytest.mark.parametrize("how", ["env", "option"])
def test_empty_root_is_unset_not_the_current_directory(h100_root, how, tmp_path):
    env, args = ({"GPUENV_ROOT": ""}, []) if how == "env" else ({}, ["--root="])
    r = gpuenv("info", "--json", "--probe=never", *args, cwd=h100_root, env=env)
    assert r.returncode == 0, r.stderr.decode()
    model = json.loads(r.stdout)
    assert model["root"] == "/"
    # this machine's own GPUs (an H100 machine's too), not the tree's: its UUIDs are made up
    tree = json.loads(gpuenv("info", "--json", "--root", ".", cwd=h100_root).stdout)
    # (two in the tree; a visible-devices mask of the caller's, CUDA_VISIBLE_DEVICES=0 on a GPU machine, applies)
    assert 1 <= len(tree["devices"]) <= 2 and all("H100" in d["name"] for d in tree["devices"])
    assert not {d["uuid"] for d in tree["devices"]} & {d["uuid"] for d in model["devices"]}
    real = json.loads(gpuenv("info", "--json", "--probe=never", cwd=tmp_path).stdout)
    assert [(d["name"], d["uuid"]) for d in model["devices"]] == [(d["name"], d["uuid"]) for d in real["devices"]]


def test_empty_root_is_unset_in_the_plugin_too(pytester, monkeypatch, h100_root):
    monkeypatch.setenv("GPUENV_ROOT", "")
    monkeypatch.chdir(h100_root)
    pytester.makepyfile("def test_root(gpu_env):\n    assert gpu_env.root == '/'\n")
    result = pytester.runpytest(str(pytester.path), "--gpuenv-probe=never")
    assert result.ret == 0


def test_gpuenv_info_answers_without_importing_pytest():
    """``gpuenv info`` (the command a user runs first) and ``import pytest_gpuenv.detect`` never import pytest, whose
    import costs more than detection; a marker imported as a decorator does."""
    script = ("import contextlib, io, sys\n"
              "from pytest_gpuenv import cli\n"
              "with contextlib.redirect_stdout(io.StringIO()):\n"
              "    cli.main(['info', '--probe', 'never'])\n"
              "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pytest', '_pytest'))[:3])\n"
              "from pytest_gpuenv import requires_rocm\n"
              "print(requires_rocm.name, 'pytest' in sys.modules)\n")
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["[]", "requires_rocm True"], p.stdout
