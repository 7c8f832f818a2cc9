"""Hostile values in every option layer and in marker arguments.

Every numeric or path option is fed numbers too big for a float (``inf``, ``1e400``, 400 nines), NaN
and negatives from the command line, the environment and the ini file: each is a usage error naming
the value and where it came from, never an INTERNALERROR. Marker arguments out of range error that one
test. An empty ``GPUENV_*`` variable counts as unset.
"""

from __future__ import annotations

import pytest

from pytest_gpuenv.base.model import MAX_DEVICES, MAX_SIZE, parse_size, safe_repr
from pytest_gpuenv.marks import markers

HUGE = ["inf", "-inf", "nan", "1e400", "9" * 400]
#: option -> (environment variable, values that must be refused besides HUGE)
NUMERIC = {
    "gpuenv_probe_timeout": ("GPUENV_PROBE_TIMEOUT", ["-5", "0", "3601"]),
    "gpuenv_perf_max_time": ("GPUENV_PERF_MAX_TIME", ["-5", "0", "601"]),
    "gpuenv_worker_gpus": ("GPUENV_WORKER_GPUS", ["0", "-1", "1.5", str(MAX_DEVICES + 1), "1e9"]),
}
CASES = [(name, value) for name, (_env, extra) in NUMERIC.items() for value in HUGE + extra]


def _layer(pytester, monkeypatch, layer: str, name: str, value: str) -> tuple[list[str], str]:
    """Put ``value`` into one layer; returns (command-line args, the source the error must name)."""
    option = "--" + name.replace("_", "-")
    if layer == "cli":
        return [f"{option}={value}"], f"command line ({option})"
    if layer == "env":
        env = NUMERIC[name][0] if name in NUMERIC else "GPUENV_" + name[len("gpuenv_"):].upper()
        monkeypatch.setenv(env, value)
        return [], f"environment variable {env}"
    pytester.makefile(".ini", tox=f"[pytest]\n{name} = {value}\n")
    return [], f"ini option {name} in tox.ini"


@pytest.mark.parametrize("layer", ["cli", "env", "ini"])
@pytest.mark.parametrize("name,value", CASES, ids=[f"{n[7:]}={v[:8]}" for n, v in CASES])
def test_numeric_option_out_of_range_is_a_usage_error(pytester, monkeypatch, layer, name, value):
    pytester.makepyfile("def test_a(): pass")
    args, where = _layer(pytester, monkeypatch, layer, name, value)
    result = pytester.runpytest("--gpuenv-backend=cpu", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stderr.str()
    option = "--" + name.replace("_", "-")
    result.stderr.fnmatch_lines([f"ERROR: gpuenv: invalid {option} value '{value[:20]}* from {where}; expected *"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize("layer", ["cli", "env", "ini"])
def test_root_that_is_a_file_is_a_usage_error_in_every_layer(pytester, monkeypatch, tmp_path, layer):
    afile = tmp_path / "not-a-tree"
    afile.write_text("")
    pytester.makepyfile("def test_a(): pass")
    args, where = _layer(pytester, monkeypatch, layer, "gpuenv_root", str(afile))
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: gpuenv: --gpuenv-root '{afile}' from {where} is not a directory"])


@pytest.mark.parametrize("value", ["1" * 5000, "x" * 100_000])
def test_overlong_values_are_refused_with_a_short_message(pytester, value):
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest(f"--gpuenv-worker-gpus={value}", f"--gpuenv-backend={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert len(result.stderr.str()) < 500


@pytest.mark.parametrize(
    "spec,fragment",
    [
        ("cuda:sm_90:1000000000x80GiB", f"the device count must be from 1 to {MAX_DEVICES}"),
        ("rocm:gfx942:" + "9" * 5000 + "x64GiB", f"the device count must be from 1 to {MAX_DEVICES}"),
        ("cuda:sm_90:0x80GiB", f"the device count must be from 1 to {MAX_DEVICES}"),
        ("cuda:sm_90:1x" + "9" * 400 + "GiB", "is too large"),
        ("cuda:sm_90:1x0.5B", "fraction of a byte"),
        ("cuda:sm_90:1xinfGiB", "cannot parse size"),
    ],
)
def test_plan_profile_numbers_are_bounded(pytester, spec, fragment):
    pytester.makepyfile("import pytest\n\n@pytest.mark.requires_gpu\ndef test_a(): pass\n")
    result = pytester.runpytest("--collect-only", "--gpuenv-plan", f"--gpuenv-plan-profile={spec}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: gpuenv: malformed --gpuenv-plan-profile *{fragment}*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_plan_profile_with_the_most_devices_runs(pytester):
    pytester.makepyfile("import pytest\n\n@pytest.mark.requires_devices(1024)\ndef test_a(): pass\n")
    result = pytester.runpytest("--collect-only", "--gpuenv-plan", f"--gpuenv-plan-profile=cuda:sm_90:{MAX_DEVICES}x80GiB")
    assert result.ret == 0
    result.stdout.fnmatch_lines([f"runs per profile: *NVIDIA sm_90 x{MAX_DEVICES} 1/1*"])


# ------------------------------------------------------------------------------------------- empty = unset
@pytest.mark.parametrize("env", ["GPUENV_ROOT", "GPUENV_BACKEND", "GPUENV_JSON", "GPUENV_PROBE_TIMEOUT",
                                 "GPUENV_WORKER_GPUS", "GPUENV_PERF_MAX_TIME", "GPUENV_COMPILE_ARCHS"])
def test_an_empty_variable_is_unset(pytester, monkeypatch, env):
    monkeypatch.setenv(env, "")
    pytester.makepyfile("def test_root(gpu_env):\n    assert gpu_env.root == '/'\n")
    result = pytester.runpytest("--gpuenv-probe=never")
    assert result.ret == 0, result.stderr.str()
    assert not list(pytester.path.glob("*.json"))


def test_an_empty_variable_falls_through_to_the_ini_file(pytester, monkeypatch):
    monkeypatch.setenv("GPUENV_BACKEND", "")
    pytester.makefile(".ini", tox="[pytest]\ngpuenv_backend = vulkan\n")
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: gpuenv: *'vulkan' from ini option gpuenv_backend in tox.ini*"])


# --------------------------------------------------------------------------------------- marker arguments
BAD_MARKERS = [
    ('requires_memory(float("inf"))', "size must be a finite number of bytes, got inf"),
    ('requires_memory(float("nan"))', "size must be a finite number of bytes, got nan"),
    ('requires_memory("9" * 400 + "GiB")', "is too large (at most 16 EiB, 2**64 bytes)"),
    ("requires_memory(10 ** 5000)", "size <int too long to show> is too large"),
    ("requires_memory(2 ** 64 + 1)", "is too large"),
    ("requires_memory(0.5)", "size 0.5 is a fraction of a byte; sizes are at least 1 byte"),
    ('requires_memory("0.5B")', "is a fraction of a byte"),
    ('requires_memory("1" * 100000)', "cannot parse size '1111"),
    ("requires_devices(10 ** 5000)", f"the number of GPUs must be at most {MAX_DEVICES}"),
    ("requires_devices(10 ** 9)", f"the number of GPUs must be at most {MAX_DEVICES}, got 1000000000"),
    ("requires_arch(10 ** 5000)", "arch pattern must be a string"),
    ("skip_on(10 ** 5000)", "unknown condition <int too long to show>"),
    ('xfail_on("cpu", strict="yes")', "strict must be True or False, got 'yes'"),
    ('xfail_on("cpu", strict=1)', "strict must be True or False, got 1"),
]


def test_hostile_marker_arguments_error_only_their_test(pytester):
    body = "import pytest\n\n"
    for i, (mark, _msg) in enumerate(BAD_MARKERS):
        body += f"@pytest.mark.{mark}\ndef test_bad_{i}(): pass\n\n"
    body += "def test_fine(): pass\n"
    pytester.makepyfile(body)
    result = pytester.runpytest("--gpuenv-backend=cpu")
    result.assert_outcomes(passed=1, errors=len(BAD_MARKERS))
    result.stdout.fnmatch_lines_random([f"*invalid marker *{msg}*" for _mark, msg in BAD_MARKERS])
    assert "INTERNALERROR" not in result.stdout.str()


HOSTILE_OBJECTS = """
class BadRepr:
    def __repr__(self):
        raise RuntimeError("no repr")


class BadEq:
    def __eq__(self, other):
        raise RuntimeError("no eq")
    __hash__ = object.__hash__
    def __repr__(self):
        raise RuntimeError("no repr")


class BadStrip(str):
    def strip(self, *a):
        raise RuntimeError("no strip")
    def __repr__(self):
        raise RuntimeError("no repr")


class BadLt(int):
    def __lt__(self, other):
        raise RuntimeError("no lt")
    __le__ = __gt__ = __ge__ = __lt__
"""
#: marker call -> what the error names (each errors its own test only)
HOSTILE_CALLS = {
    "requires_devices(BadRepr())": "invalid marker requires_devices(<BadRepr object: repr raised RuntimeError>)",
    "requires_wsl(BadEq())": "invalid marker requires_wsl(<BadEq object: repr raised RuntimeError>): an argument raised RuntimeError",
    "requires_wsl(version=BadEq())": "invalid marker requires_wsl(version=<BadEq*): an argument raised RuntimeError: no eq",
    'skip_on(BadStrip("cpu"))': "invalid marker skip_on(<BadStrip object: repr raised RuntimeError>): an argument raised RuntimeError: no",
    'xfail_on(BadStrip("rocm"))': "invalid marker xfail_on(<BadStrip*): an argument raised RuntimeError: no strip",
    'requires_arch(BadStrip("gfx90a"))': "invalid marker requires_arch(<BadStrip*): an argument raised RuntimeError: no strip",
    "requires_devices(BadLt(2))": "invalid marker requires_devices(2): an argument raised RuntimeError: no lt",
    "requires_memory(BadLt(2 ** 30))": "invalid marker requires_memory(1073741824): an argument raised RuntimeError: no lt",
    'skip_on("cpu", reason=BadRepr())': "invalid marker skip_on('cpu', reason=<BadRepr*): reason must be a string",
}


@pytest.mark.parametrize("plan", [False, True], ids=["run", "plan"])
def test_marker_arguments_whose_own_methods_raise_error_only_their_test(pytester, plan):
    body = HOSTILE_OBJECTS + "\nimport pytest\n\n"
    for i, mark in enumerate(HOSTILE_CALLS):
        body += f"@pytest.mark.{mark}\ndef test_bad_{i}(): pass\n\n"
    pytester.makepyfile(body + "def test_fine(): pass\n")
    if plan:
        result = pytester.runpytest_subprocess("--collect-only", "--gpuenv-plan", timeout=120)
        assert result.ret == 0, result.stdout.str()[-3000:]
        result.stdout.fnmatch_lines_random([f"*test_bad_*: {msg.replace('[', '[[]')}*" for msg in HOSTILE_CALLS.values()])
    else:
        result = pytester.runpytest_subprocess("--gpuenv-backend=cpu", timeout=120)
        result.assert_outcomes(passed=1, errors=len(HOSTILE_CALLS))
        result.stdout.fnmatch_lines_random([f"*{msg.replace('[', '[[]')}*" for msg in HOSTILE_CALLS.values()])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_hostile_marker_arguments_in_the_plan_table(pytester):
    pytester.makepyfile(
        'import pytest\n\n@pytest.mark.requires_memory(float("inf"))\ndef test_inf(): pass\n\n'
        '@pytest.mark.requires_devices(10 ** 5000)\ndef test_many(): pass\n'
    )
    result = pytester.runpytest("--collect-only", "--gpuenv-plan")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*test_inf*error*error*error*error",
                                 "2 test(s) with a bad marker argument (an error wherever they run):",
                                 "*::test_inf: invalid marker requires_memory(inf)*",
                                 "*::test_many: invalid marker requires_devices(<int too long to show>)*"])


def test_a_bad_marker_argument_is_said_once_below_the_plan_table(pytester):
    """The table's columns say ``error`` (the message once, below, not in each profile's column), and the errored
    test is not listed as one that runs on no profile."""
    def plan(*marks: str) -> str:
        pytester.makepyfile(test_t="import pytest\n" + "".join(f"@pytest.mark.{m}\ndef test_{i}(): pass\n"
                                                         for i, m in enumerate(marks)))
        result = pytester.runpytest("--collect-only", "-q", "--gpuenv-plan")
        assert result.ret == 0
        return result.stdout.str().split("gpuenv: plan")[1]

    def width(plan: str) -> int:
        return max(len(line) for line in plan.split("\n\n")[0].splitlines()[1:])

    alone = plan("requires_rocm")
    plan = plan("requires_rocm", 'requires_memory("lots")')
    assert width(plan) == width(alone), plan  # the errored test widens no column
    assert plan.count("invalid marker requires_memory('lots')") == 1, plan
    assert "run on no profile" not in plan, plan


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan"), 0.5, 0.999, 2**64 + 1, 10**5000,
                                   "9" * 400 + "GiB", "0.1B", "1e400", True, None, [1]], ids=lambda v: safe_repr(v, 20))
def test_parse_size_refuses(value):
    with pytest.raises(ValueError):
        parse_size(value)


def test_parse_size_bounds():
    assert parse_size(1) == 1
    assert parse_size(1.5) == 1
    assert parse_size(MAX_SIZE) == MAX_SIZE
    assert parse_size("16384TiB") == 2**54
    assert parse_size("0.5GiB") == 2**29


def test_validate_strict_is_a_bool():
    assert markers.validate("xfail_on", ("cpu",), {"strict": True})
    for bad in ("yes", 1, None, "False"):
        with pytest.raises(markers.MarkerArgumentError, match="strict must be True or False"):
            markers.validate("xfail_on", ("cpu",), {"strict": bad})


# ------------------------------------------------------------------- TOML values of the wrong type
#: (option, TOML value, what the error says after "... from ini option NAME in pyproject.toml"); the
#: paths of the kernel directories, root, baselines, cache and report take only text (an array too for
#: the kernel directories), in both TOML tables
TOML_CASES = [
    ("gpuenv_kernel_dirs", '"\'unclosed"', "ERROR: gpuenv: ini option gpuenv_kernel_dirs in pyproject.toml is \"'unclosed\": "
                                          "No closing quotation"),
    ("gpuenv_kernel_dirs", '"x\\u0000y"', "*kernel directory '*x\\x00y' from ini option gpuenv_kernel_dirs in "
                                          "pyproject.toml holds a NUL character; expected a path"),
    ("gpuenv_root", '["a", "b"]', "*--gpuenv-root ['a', 'b'] from ini option gpuenv_root in pyproject.toml is a list*"),
    ("gpuenv_root", "[[1]]", "*--gpuenv-root [[1]] from ini option gpuenv_root in pyproject.toml is a list*"),
    ("gpuenv_baselines", '["a"]', "*baselines file ['a'] from ini option gpuenv_baselines in pyproject.toml is a list*"),
    ("gpuenv_cache_dir", '"x\\u0000y"', "*--gpuenv-cache-dir 'x\\x00y' from ini option gpuenv_cache_dir in "
                                        "pyproject.toml holds a NUL character*"),
    ("gpuenv_json", '"x\\u0000y"', "*--gpuenv-json 'x\\x00y' from ini option gpuenv_json in pyproject.toml holds a NUL*"),
]
#: only pytest 9's native table keeps a scalar's TOML type (the ini_options table hands over its text)
NATIVE_CASES = [
    (name, value, f"*from ini option {name} in pyproject.toml is {kind}*")
    for name in ("gpuenv_root", "gpuenv_baselines", "gpuenv_kernel_dirs", "gpuenv_cache_dir", "gpuenv_json")
    for value, kind in (("5", "a number"), ("1.5", "a number"), ("true", "a boolean"), ("{a = 1}", "a table"),
                        ("1979-05-27", "a date or time"), ("1979-05-27T07:32:00Z", "a date or time"))
]


@pytest.mark.parametrize("table, name, value, line", [
    *[(t, *case) for t in ("tool.pytest.ini_options", "tool.pytest") for case in TOML_CASES],
    *[("tool.pytest", *case) for case in NATIVE_CASES],
], ids=lambda v: str(v)[:24])
def test_a_toml_value_of_the_wrong_type_is_a_usage_error(pytester, table, name, value, line):
    pytester.makefile(".toml", pyproject=f"[{table}]\n{name} = {value}\n")
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest("--gpuenv-backend=cpu", "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-2000:]
    result.stderr.fnmatch_lines([line.replace("[", "[[]")])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
