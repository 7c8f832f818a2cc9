"""Random file trees, junk and wrong file types thrown at detect(root=...): a valid model every time.

The trees hold symlinks (absolute, relative, ``..``, loops, and links aimed at a "host" tree beside the
root that holds a ROCm install, a GPU topology and a secret), special files (FIFOs, character devices
where ``os.mknod`` is allowed, 20 GiB sparse files) and numbers far beyond u64. Whatever the tree holds,
detection finishes, reports nothing from outside the root, and gives a valid model.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import stat
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_gpuenv.base.model import KINDS, GpuEnv, Usability
from pytest_gpuenv.detect import detect

TOPO = "sys/devices/virtual/kfd/kfd/topology"
KEYS = ["gpu_id", "simd_count", "gfx_target_version", "wave_front_size", "location_id", "domain",
        "drm_render_minor", "unique_id", "heap_type", "size_in_bytes", "device_id", "vendor_id", "num_xcc"]
SECRET = "HOSTSECRET-77c1"
HOST_UID = 0xC0FFEE0DDF00D
HOST_GPU = f"GPU-{HOST_UID:016x}"

PATHS = [
    "sys/class/kfd/kfd",
    f"{TOPO}/nodes/0/gpu_id",
    f"{TOPO}/nodes/0/properties",
    f"{TOPO}/nodes/1/gpu_id",
    f"{TOPO}/nodes/1/properties",
    f"{TOPO}/nodes/1/name",
    f"{TOPO}/nodes/1/mem_banks/0/properties",
    f"{TOPO}/nodes/2/gpu_id",
    f"{TOPO}/nodes/2/properties",
    f"{TOPO}/nodes/x/gpu_id",
    "sys/module/amdgpu/initstate",
    "sys/module/amdgpu/version",
    "proc/driver/nvidia/version",
    "proc/driver/nvidia/gpus/0000:01:00.0/information",
    "proc/driver/nvidia/gpus/junk/information",
    "opt/rocm/.info/version",
    "opt/rocm/lib/libamdhip64.so.6",
    "opt/rocm/lib/librocdxg.so",
    "usr/lib/python3/dist-packages/torch/version.py",
    "proc/sys/kernel/osrelease",
    "proc/1/cgroup",
    "dev/kfd",
    "dev/dri/renderD128",
    "dev/nvidiactl",
    "dev/nvidia0",
    "dev/dxg",
    "usr/lib/wsl/lib/libcuda.so.1",
    "usr/lib/wsl/lib/nvidia-smi",
    "Windows/System32/amdhip64_6.dll",
    ".dockerenv",
]
#: where a link can stand in for a whole folder
LINK_DIRS = ["opt/rocm", "dev", "dev/dri", f"{TOPO}/nodes/1", f"{TOPO}/nodes/3", f"{TOPO}/nodes/1/mem_banks",
             "sys/devices/virtual/kfd/kfd/topology/nodes", "usr/lib/python3/dist-packages/torch", "venv", "usr/bin"]
#: what a host-aimed link names inside the host tree (which mirrors a root's layout)
HOST_TARGETS = ["opt/rocm", "opt/rocm/.info/version", TOPO, f"{TOPO}/nodes", f"{TOPO}/nodes/1",
                f"{TOPO}/nodes/1/properties", "secret", "dev", "dev/kfd", "usr/lib/python3/dist-packages/torch",
                "usr/bin", "venv", ""]

huge = st.sampled_from(["9" * 321, "1" * 4400, "7" * 5000, str(2**64), str(2**64 - 1), "0" * 5000 + "1",
                        "1" + "0" * 20])
ints = st.one_of(st.integers(0, 200000), st.integers(-(2**70), 2**70), st.sampled_from([0, 1, 32, 64, 90402, 100301]),
                 st.integers(2**64 - 2, 2**64 + 2)).map(str)
values = st.one_of(ints, huge)
props = st.lists(
    st.tuples(st.sampled_from(KEYS), values).map(lambda kv: f"{kv[0]} {kv[1]}"), max_size=14
).map(lambda lines: "\n".join(lines) + "\n")
gpu_props = st.fixed_dictionaries({k: st.one_of(ints, ints, ints, huge) for k in KEYS}).map(
    lambda d: "cpu_cores_count 0\n" + "".join(f"{k} {v.lstrip('-') if k == 'simd_count' else v}\n"
                                               for k, v in d.items())
    + "simd_count 4\n"
)
plausible = st.sampled_from([
    "0\n", "51844\n", "live\n", "6.4.1\n", "rocm-6.4.1", "../../devices/virtual/kfd/kfd",
    "5.15.167.4-microsoft-standard-WSL2\n", "4.4.0-18985-Microsoft\n", "0::/\n",
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.90.07  Release Build\n",
    "Model: \t NVIDIA H100\nGPU UUID: \t GPU-0000\nBus Location: \t 0000:zz:00.0\nDevice Minor: \t 99999999999\n",
    "__version__ = '2.7.1+rocm6.3'\ncuda: Optional[str] = None\nhip: Optional[str] = '6.3.1'\n",
    "__version__ = 5\nhip = (\n",
    "9" * 321 + "\n", "1" * 5000 + "\n",
])
rel_path = st.sampled_from(PATHS + LINK_DIRS + ["", "sys", "opt", "nope/none"])
#: ("in", path): absolute inside the root; ("rel", ups, path): relative, climbing ``ups`` folders first;
#: ("host", path) absolute to the host tree; ("escape", path): enough ``..`` to climb out, then the host tree
link_target = st.one_of(
    st.tuples(st.just("in"), rel_path),
    st.tuples(st.just("rel"), st.integers(0, 12), rel_path),
    st.tuples(st.just("host"), st.sampled_from(HOST_TARGETS)),
    st.tuples(st.just("escape"), st.sampled_from(HOST_TARGETS)),
    st.sampled_from([("self",), (".",), ("..",), ("chain",), ("mirror",), ("escape-mirror",)]),
)
content = st.one_of(
    st.tuples(st.just("text"), st.text(max_size=200)),
    st.tuples(st.just("bytes"), st.binary(max_size=300)),
    st.tuples(st.just("text"), props),
    st.tuples(st.just("text"), gpu_props),
    st.tuples(st.just("text"), plausible),
    st.tuples(st.just("dir"), st.none()),
    st.tuples(st.just("unreadable"), st.text(max_size=20)),
    st.tuples(st.just("loop"), st.none()),
    st.tuples(st.just("dangling"), st.none()),
    st.tuples(st.just("link"), link_target),
    st.tuples(st.just("link"), link_target),
    st.tuples(st.just("fifo"), st.none()),
    st.tuples(st.just("chardev"), st.sampled_from([(1, 3), (1, 5)])),  # /dev/null, /dev/zero
    st.tuples(st.just("sparse"), st.one_of(st.just(""), gpu_props, plausible)),
)
junk_name = st.text(alphabet="abcxyz019._-", min_size=1, max_size=12).filter(lambda s: s not in (".", ".."))
env_value = st.one_of(st.none(), st.text(max_size=20), st.sampled_from([
    "", "0", "1,0", "GPU-", "0,0", "-1", "10.3.0", "١٠.٣.٠", "１０.３.０", "64.0.0", "1" * 5000 + ".0.0",
    "9" * 5000, "/..", "/../../opt/rocm", "{host}/opt/rocm", "{escape}/opt/rocm", "{escape}/bin", "{host}/venv",
]))


def _host_tree(host: str) -> None:
    """Beside the root, laid out like one: what no link or variable may make detection report."""
    files = {
        "opt/rocm/.info/version": "9.9.9-HOST\n",
        "opt/rocm/lib/libamdhip64.so.6": "",
        "opt/rocm/bin/hipcc": "#!/bin/sh\n",
        "usr/bin/hipcc": "#!/bin/sh\n",
        "sys/module/amdgpu/initstate": "live\n",
        f"{TOPO}/nodes/1/gpu_id": "51844\n",
        f"{TOPO}/nodes/1/properties": f"simd_count 4\ngfx_target_version 90402\ndrm_render_minor 128\n"
                                      f"unique_id {HOST_UID}\ndevice_id 4660\n",
        f"{TOPO}/nodes/1/name": SECRET + "\n",
        "secret": SECRET + "\n",
        "dev/kfd": "",
        "dev/dri/renderD128": "",
        "usr/lib/python3/dist-packages/torch/version.py": f"__version__ = '9.9.9+{SECRET}'\nhip: Optional[str] = '9'\n",
        "venv/lib/python3.11/site-packages/torch/version.py": f"__version__ = '9.9.8+{SECRET}'\n",
    }
    for rel, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(host, rel)), exist_ok=True)
        with open(os.path.join(host, rel), "w", encoding="utf-8") as f:
            f.write(text)
    for rel in ("opt/rocm/bin/hipcc", "usr/bin/hipcc"):
        os.chmod(os.path.join(host, rel), 0o755)
    os.makedirs(os.path.join(host, "sys/class/kfd"))
    os.symlink("../../devices/virtual/kfd/kfd", os.path.join(host, "sys/class/kfd/kfd"))


def _target(rel: str, host: str, spec: tuple) -> str:
    depth = rel.count("/")
    kind = spec[0]
    if kind == "in":
        return "/" + spec[1]
    if kind == "rel":
        return "../" * spec[1] + spec[2]
    if kind == "host":
        return os.path.join(host, spec[1])
    if kind == "escape":
        return "../" * (depth + 40) + os.path.join(host, spec[1]).lstrip("/")
    if kind == "mirror":  # the same place in the host tree
        return os.path.join(host, rel)
    if kind == "escape-mirror":
        return "../" * (depth + 40) + os.path.join(host, rel).lstrip("/")
    if kind == "self":
        return os.path.basename(rel)
    if kind == "chain":  # a -> a.next -> a (two links)
        return os.path.basename(rel) + ".next"
    return kind  # "." or ".."


def _inside_only(base: str, rel: str) -> bool:
    """No folder on the way to ``rel`` is a link: creating it never writes through a link (to the host)."""
    parts = rel.split("/")[:-1]
    return all(not os.path.islink(os.path.join(base, *parts[:i])) for i in range(1, len(parts) + 1))


def _make(base: str, rel: str, kind: str, value, host: str = "/nonexistent") -> None:
    path = os.path.join(base, rel)
    parent = os.path.dirname(path)
    if not _inside_only(base, rel):
        return
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError:
        return  # a file already sits where a folder is needed
    if os.path.lexists(path):
        return
    with contextlib.suppress(OSError):
        _create(path, rel, kind, value, host)


def _create(path: str, rel: str, kind: str, value, host: str) -> None:
    if kind == "dir":
        os.makedirs(path, exist_ok=True)
    elif kind == "loop":
        os.symlink(os.path.basename(path), path)
    elif kind == "dangling":
        os.symlink("does/not/exist", path)
    elif kind == "link":
        os.symlink(_target(rel, host, value), path)
        if value[0] == "chain":
            os.symlink(os.path.basename(path), path + ".next")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "chardev":
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(*value))
        except OSError:  # not root, or no CAP_MKNOD: a FIFO is the other special file
            os.mkfifo(path)
    elif kind == "sparse":
        with open(path, "w", encoding="utf-8") as f:
            f.write(value)
            f.truncate(20 << 30)
    elif kind == "bytes":
        with open(path, "wb") as f:
            f.write(value)
    else:
        with open(path, "w", encoding="utf-8") as f:
            f.write(value)
        if kind == "unreadable":
            os.chmod(path, 0)


@contextlib.contextmanager
def _time_limit(seconds: int):
    """A FIFO opened for reading or a read without bound would hang: fail the example instead."""
    def _fail(signum, frame):
        raise TimeoutError(f"detect() did not finish within {seconds} s")

    old = signal.signal(signal.SIGALRM, _fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _environ(env: dict, host: str) -> dict:
    out = {}
    for k, v in env.items():
        if v is not None:
            out[k] = v.replace("{host}", host).replace("{escape}", "/.." * 40 + host)
    return out


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    files=st.dictionaries(st.sampled_from(PATHS), content, max_size=len(PATHS)),
    links=st.dictionaries(st.sampled_from(LINK_DIRS), st.tuples(st.just("link"), link_target), max_size=4),
    junk=st.dictionaries(st.tuples(st.sampled_from(["", "sys/", "proc/driver/", f"{TOPO}/nodes/", "opt/", "dev/"]),
                                   junk_name).map("".join), content, max_size=6),
    env=st.fixed_dictionaries({k: env_value for k in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
                                                       "ROCR_VISIBLE_DEVICES", "HSA_OVERRIDE_GFX_VERSION",
                                                       "HSA_ENABLE_DXG_DETECTION", "ROCM_PATH", "PATH",
                                                       "VIRTUAL_ENV", "CUDA_HOME")}),
    seed=st.one_of(st.none(), gpu_props),
)
def test_random_trees_give_a_valid_model(files, links, junk, env, seed):
    with tempfile.TemporaryDirectory() as tmp:
        base, host = os.path.join(tmp, "root"), os.path.join(tmp, "host")
        os.mkdir(base)
        _host_tree(host)
        environ = _environ(env, host)
        for rel, (kind, value) in list(links.items()) + list(files.items()) + list(junk.items()):
            _make(base, rel, kind, value, host)
        if seed is not None:  # a GPU node (where the random files left room for one)
            _make(base, f"{TOPO}/nodes/1/gpu_id", "text", "51844\n")
            _make(base, f"{TOPO}/nodes/1/properties", "text", seed)
            _make(base, "dev/kfd", "text", "")
        with _time_limit(60):
            result = detect(root=base, environ=environ)
        for dirpath, dirs, names in os.walk(base):
            for n in names + dirs:
                with contextlib.suppress(OSError, NotImplementedError):
                    os.chmod(os.path.join(dirpath, n), 0o755, follow_symlinks=False)
    assert "detect-internal-error" not in result.problem_codes, result.problems
    assert result.backend in ("cpu", "rocm", "cuda")
    assert result.kind in KINDS
    assert isinstance(result.usable, Usability)
    assert result.probe["ran"] is False
    assert [d.index for d in result.devices] == list(range(len(result.devices)))
    for d in result.devices:
        assert d.vendor in ("amd", "nvidia")
        assert d.memory_bytes is None or 0 < d.memory_bytes < 2**64
    if result.backend != "cpu":
        assert result.usable_devices or result.usable is Usability.PROBE_REQUIRED
    data = result.to_dict()
    text = json.dumps(data)
    assert GpuEnv.from_dict(json.loads(text)).to_dict() == json.loads(text)
    # nothing from outside the root: not the host's ROCm, GPU, torch, hipcc or secret
    assert SECRET not in text and "9.9.9" not in text and "9.9.8" not in text
    assert HOST_GPU not in {d.uuid for d in result.devices + result.hidden_devices}
    assert result.compilers.get("hipcc") is None  # only the host tree has one
    for d in result.devices:  # a bad value loses its node, never the whole topology
        # a PCI domain is 32 bits (Linux prints it %04x: VMD domains read 10000:...), KFD's too
        assert d.pci is None or re.fullmatch(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", d.pci), d.pci
