"""``--gpuenv-plan-profile`` files that cannot be read: usage errors that say what is wrong and how to write it."""

import pytest

pytestmark = pytest.mark.usefixtures("hosts_isolated")


@pytest.mark.parametrize("content,message", [
    (None, "not a readable `gpuenv info --json` output: *No such file*"),
    ("[1, 2]", "*expected a JSON object, got list"),
    ('{"backend": "cuda", "devices": [{"index": 0, "vendor": "nvidia", "memory_bytes": "lots"}]}',
     "*device memory_bytes 'lots' is not int"),
    ('{"backend": "cuda", "devices": [{"vendor": "nvidia"}]}', "*not a readable*"),
])
def test_bad_plan_profile_file_is_a_usage_error(pytester, tmp_path, content, message):
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest_subprocess("--collect-only", "--gpuenv-plan", f"--gpuenv-plan-profile=@{path}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--gpuenv-plan-profile*{message}*"])


def test_plan_profile_file_as_a_separate_argument_says_to_write_the_equals(pytester, tmp_path):
    """``--gpuenv-plan-profile @FILE`` (a space, not '='): pytest expands @FILE as an args file, so the JSON's
    first line arrives as the spec; the error says to write ``--gpuenv-plan-profile=@FILE.json``."""
    path = tmp_path / "gpu-a.json"
    path.write_text('{\n  "schema": 1,\n  "backend": "cpu"\n}\n')
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest_subprocess("--collect-only", "--gpuenv-plan", "--gpuenv-plan-profile", f"@{path}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*malformed --gpuenv-plan-profile '{'*written* --gpuenv-plan-profile=@FILE.json, with the '='*"])
