"""A kernel can never take pytest down: the CPU executor runs in a child process of pytest.

Each hostile kernel runs in a pytester session (own process) followed by a canary test that must
pass; the session ends with exit code 1 (never 0, never a crash of pytest) and writes its JUnit XML.
"""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET

import pytest

pytestmark = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("clang++") is None,
                                reason="no C++ compiler")
pytest.importorskip("numpy")

HEAD = '#include <hip/hip_runtime.h>\n#include <signal.h>\n#include <stdlib.h>\n#include <string.h>\n#include <unistd.h>\n'
K = 'extern "C" __global__ void k(int* p) {\n'  # line 6 of every source below
HOSTILE = {
    "exit0": (K + "  exit(0);\n}\n", "KernelExitError: process exit in kernel 'k' at <source>.hip:7*the kernel called exit(0)*"),
    "exit3": (K + "  exit(3);\n}\n", "KernelExitError: *<source>.hip:7*the kernel called exit(3)*"),
    "_exit": (K + "  _exit(0);\n}\n", "KernelExitError: *the kernel ended the executor process with _exit(0)*"),
    "quick_exit": (K + "  quick_exit(5);\n}\n", "KernelExitError: *<source>.hip:7*the kernel called quick_exit(5)*"),
    "abort": (K + "  abort();\n}\n", "KernelFaultError: fault in kernel 'k' at <source>.hip:7*SIGABRT*"),
    "sigkill": (K + "  raise(SIGKILL);\n}\n", "KernelFaultError: *killed by SIGKILL*"),
    "null_write": (K + "  *(volatile int*)(p[1] * 8) = 1;\n}\n", "KernelBoundsError: *<source>.hip:7*address 0x0*"),
    "memset_past": (K + "  memset(p, 0, 4096);\n}\n",
                    "KernelBoundsError: *<source>.hip:7*write of 4096 bytes out of bounds: argument 'p'*"),
    "bad_free": (K + "  int x[4] = {0};\n  free(x + 1 + p[1]);\n}\n", "KernelFaultError: fault in kernel 'k' at <source>.hip:8*"),
    "static_init": ("static int* volatile bad;\nstruct Init { Init() { *bad = 1; } } init;\n" + K + "  p[0] = 1;\n}\n",
                    "KernelFaultError: *<source>.hip:7*SIGSEGV*while its module was loaded*static initialisers*"),
    # the line (<source>.hip:7) when the child answers SIGUSR2 with a stack that reaches the kernel: not on a loaded
    # 2-core machine within the wait, nor on the H200 image's glibc; the kill itself always
    "usleep_loop": (K + "  for (;;) usleep(1000);\n}\n", "KernelWatchdogError: watchdog in kernel 'k' at *more than 1 s; pytest killed*"),
    "signals_blocked": (K + "  sigset_t s;\n  sigfillset(&s);\n  sigprocmask(SIG_BLOCK, &s, 0);\n  for (;;) {}\n}\n",
                        "KernelWatchdogError: *more than 1 s*"),
    "fork": (K + "  if (fork() == 0) p[0] = 1;\n}\n", "KernelProcessError: *the kernel started a process (1 time(s)*"),
    # glibc starts system()'s shell through posix_spawn (no fork handlers) and reaps it itself
    "system": (K + '  p[0] = system("true");\n}\n', "KernelProcessError: *the kernel started a process*"),
    "pthread": ("#include <pthread.h>\nstatic void* spin(void*) { for (;;) {} return 0; }\n" + K
                + "  pthread_t t;\n  pthread_create(&t, 0, spin, 0);\n}\n", "KernelProcessError: *started 1 thread(s)*"),
    # process state a kernel changes for the launches after it (a later module load failing with "Too many open
    # files", a later launch dying of SIGALRM): its own launch fails, and the canary runs in a fresh executor
    "setrlimit_nofile": ("#include <sys/resource.h>\n" + K + "  struct rlimit r = {8, 8};\n  setrlimit(RLIMIT_NOFILE, &r);\n}\n",
                         "KernelProcessError: *the kernel changed its process for later launches (RLIMIT_NOFILE*"),
    "setrlimit_fsize": ("#include <sys/resource.h>\n" + K + "  struct rlimit r = {0, 0};\n  setrlimit(RLIMIT_FSIZE, &r);\n}\n",
                        "KernelProcessError: *(RLIMIT_FSIZE (*) -> (0, 0))*cannot set limits, timers*"),
    "alarm": (K + "  alarm(30);\n}\n", "KernelProcessError: *ITIMER_REAL armed (alarm() or setitimer())*"),
    "chdir": (K + '  p[0] = chdir("/");\n}\n', "KernelProcessError: *working folder *->*"),
    "sigprocmask": (K + "  sigset_t s;\n  sigfillset(&s);\n  sigprocmask(SIG_BLOCK, &s, 0);\n}\n",
                    "KernelProcessError: *blocked signals [[][]] -> *"),
    "umask": ("#include <sys/stat.h>\n" + K + "  umask(0);\n}\n", "KernelProcessError: *umask 0o* -> 0o0*"),
    "huge_local_array": (K + "  volatile char big[1 << 22];\n  big[p[1]] = 1;\n  p[0] = big[p[2]];\n}\n",
                         "KernelStackOverflowError: *stack overflow*"),
}

TESTS = '''\
import os
import numpy as np
from pytest_gpuenv.rtc import compile_kernel

CANARY = """#include <hip/hip_runtime.h>
extern "C" __global__ void add(float* out, const float* a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + 1.0f;
}
"""


def test_hostile():
    k = compile_kernel(os.environ["ISO_SRC"], "k", arch="cpu", cache_dir=os.environ["ISO_CACHE"])
    k(1, 1, np.zeros(4, np.int32))


def test_canary():
    k = compile_kernel(CANARY, "add", arch="cpu", cache_dir=os.environ["ISO_CACHE"])
    a = np.arange(100, dtype=np.float32)
    out = np.zeros_like(a)
    k(4, 32, out, a, 100)
    assert (out == a + 1).all()
'''


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("iso-cache"))


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_kernel_fails_its_test_only(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, cache: str,
                                            name: str) -> None:
    body, expected = HOSTILE[name]
    monkeypatch.setenv("ISO_SRC", HEAD + body)
    monkeypatch.setenv("ISO_CACHE", cache)
    monkeypatch.setenv("GPUENV_CPU_WATCHDOG", "1")
    pytester.makepyfile(test_iso=TESTS)
    xml = pytester.path / "junit.xml"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist", f"--junitxml={xml}",
                                           timeout=300)
    result.assert_outcomes(failed=1, passed=1)
    assert result.ret == 1
    result.stdout.fnmatch_lines([f"*{expected}"])
    suite = ET.parse(xml).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1" and suite.get("tests") == "2"


@pytest.mark.parametrize("name", ["exit0", "abort"])
def test_hostile_kernel_under_xdist(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, cache: str,
                                    name: str) -> None:
    """An xdist worker's executor process dies, not the worker: the run ends with both tests reported."""
    pytest.importorskip("xdist")
    monkeypatch.setenv("ISO_SRC", HEAD + HOSTILE[name][0])
    monkeypatch.setenv("ISO_CACHE", cache)
    pytester.makepyfile(test_iso=TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", timeout=300)
    result.assert_outcomes(failed=1, passed=1)
    assert result.ret == 1
    assert "crashed" not in result.stdout.str()  # xdist's words for a worker that died


THREADS = '''\
import os
import threading
import numpy as np
import pytest
from pytest_gpuenv.rtc import KernelWatchdogError, compile_kernel

SRC = """#include <hip/hip_runtime.h>
#include <unistd.h>
extern "C" __global__ void add(float* out, const float* a, int n, int hang) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + 1.0f;
    while (hang) usleep(1000);
}
"""


def test_first_launch_from_a_thread_that_ends():
    """The executor's process outlives the thread that started it (it must not get its parent-death signal)."""
    k = compile_kernel(SRC, "add", arch="cpu", cache_dir=os.environ["ISO_CACHE"])
    a = np.ones(10, np.float32)
    out = np.zeros_like(a)
    t = threading.Thread(target=k, args=(1, 32, out, a, 10, 0))
    t.start()
    t.join()
    import time
    time.sleep(0.5)
    out[:] = 0
    k(1, 32, out, a, 10, 0)
    assert (out == 2).all()


def test_two_threads_launch_at_once():
    k = compile_kernel(SRC, "add", arch="cpu", cache_dir=os.environ["ISO_CACHE"])
    errors, hung = [], []

    def work(seed, hang):
        a = np.full(1000, seed, np.float32)
        for _ in range(1 if hang else 30):
            out = np.zeros_like(a)
            try:
                k(8, 128, out, a, 1000, hang)
            except KernelWatchdogError:
                hung.append(seed)
                continue
            if not (out == a + 1).all():
                errors.append(seed)

    ts = [threading.Thread(target=work, args=(s, int(s == 3))) for s in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert errors == [] and hung == [3]
'''


def test_threads_launch_safely_each_with_its_watchdog(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                      cache: str) -> None:
    monkeypatch.setenv("ISO_CACHE", cache)
    monkeypatch.setenv("GPUENV_CPU_WATCHDOG", "1")
    pytester.makepyfile(test_threads=THREADS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist", timeout=300)
    result.assert_outcomes(passed=2)


@pytest.mark.parametrize("value", ["abc", "nan", "0", "-1", "inf", "1e400", ""])
def test_bad_watchdog_value_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    from pytest_gpuenv.runtime.cpu import watchdog_seconds

    monkeypatch.setenv("GPUENV_CPU_WATCHDOG", value)
    with pytest.raises(ValueError, match=rf"^GPUENV_CPU_WATCHDOG={value!r} is not a number of seconds"):
        watchdog_seconds()
    monkeypatch.setenv("GPUENV_CPU_WATCHDOG", "2.5")
    assert watchdog_seconds() == 2.5
