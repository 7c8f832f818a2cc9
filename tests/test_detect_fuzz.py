"""Random file trees, junk and wrong file types thrown at detect(root=...): a valid model every time."""

from __future__ import annotations

import json
import os
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_gpuenv.detect import detect
from pytest_gpuenv.model import KINDS, GpuEnv

TOPO = "sys/devices/virtual/kfd/kfd/topology"
KEYS = ["gpu_id", "simd_count", "gfx_target_version", "wave_front_size", "location_id", "domain",
        "drm_render_minor", "unique_id", "heap_type", "size_in_bytes", "device_id", "vendor_id", "num_xcc"]

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

ints = st.one_of(st.integers(0, 200000), st.integers(-(2**70), 2**70), st.sampled_from([0, 1, 32, 64, 90402, 100301]))
props = st.lists(
    st.tuples(st.sampled_from(KEYS), ints).map(lambda kv: f"{kv[0]} {kv[1]}"), max_size=14
).map(lambda lines: "\n".join(lines) + "\n")
gpu_props = st.fixed_dictionaries({k: ints for k in KEYS}).map(
    lambda d: "cpu_cores_count 0\n" + "".join(f"{k} {abs(v) if k == 'simd_count' else v}\n" for k, v in d.items())
    + "simd_count 4\n"
)
plausible = st.sampled_from([
    "0\n", "51844\n", "live\n", "6.4.1\n", "rocm-6.4.1", "../../devices/virtual/kfd/kfd",
    "5.15.167.4-microsoft-standard-WSL2\n", "4.4.0-18985-Microsoft\n", "0::/\n",
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.90.07  Release Build\n",
    "Model: \t NVIDIA H100\nGPU UUID: \t GPU-0000\nBus Location: \t 0000:zz:00.0\nDevice Minor: \t 99999999999\n",
    "__version__ = '2.7.1+rocm6.3'\ncuda: Optional[str] = None\nhip: Optional[str] = '6.3.1'\n",
    "__version__ = 5\nhip = (\n",
])
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
)
junk_name = st.text(alphabet="abcxyz019._-", min_size=1, max_size=12).filter(lambda s: s not in (".", ".."))
env_value = st.one_of(st.none(), st.text(max_size=20), st.sampled_from(["", "0", "1,0", "GPU-", "0,0", "-1", "10.3.0"]))


def _make(base: str, rel: str, kind: str, value) -> None:
    path = os.path.join(base, rel)
    parent = os.path.dirname(path)
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError:
        return  # a file already sits where a folder is needed
    if os.path.lexists(path):
        return
    try:
        if kind == "dir":
            os.makedirs(path, exist_ok=True)
        elif kind == "loop":
            os.symlink(os.path.basename(path), path)
        elif kind == "dangling":
            os.symlink("does/not/exist", path)
        elif kind == "bytes":
            with open(path, "wb") as f:
                f.write(value)
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(value)
            if kind == "unreadable":
                os.chmod(path, 0)
    except OSError:
        pass


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    files=st.dictionaries(st.sampled_from(PATHS), content, max_size=len(PATHS)),
    junk=st.dictionaries(st.tuples(st.sampled_from(["", "sys/", "proc/driver/", f"{TOPO}/nodes/", "opt/", "dev/"]),
                                   junk_name).map("".join), content, max_size=6),
    env=st.fixed_dictionaries({k: env_value for k in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
                                                       "ROCR_VISIBLE_DEVICES", "HSA_OVERRIDE_GFX_VERSION",
                                                       "HSA_ENABLE_DXG_DETECTION", "ROCM_PATH", "PATH")}),
    seed=st.one_of(st.none(), gpu_props),
)
def test_random_trees_give_a_valid_model(files, junk, env, seed):
    environ = {k: v for k, v in env.items() if v is not None}
    with tempfile.TemporaryDirectory() as base:
        for rel, (kind, value) in list(files.items()) + list(junk.items()):
            _make(base, rel, kind, value)
        if seed is not None:  # a GPU node (where the random files left room for one)
            _make(base, f"{TOPO}/nodes/1/gpu_id", "text", "51844\n")
            _make(base, f"{TOPO}/nodes/1/properties", "text", seed)
            _make(base, "dev/kfd", "text", "")
        result = detect(root=base, environ=environ)
        for dirpath, dirs, names in os.walk(base):
            for n in names + dirs:
                try:
                    os.chmod(os.path.join(dirpath, n), 0o755, follow_symlinks=False)
                except (OSError, NotImplementedError):
                    pass
    assert "detect-internal-error" not in result.problem_codes, result.problems
    assert result.backend in ("cpu", "rocm", "cuda")
    assert result.kind in KINDS
    assert result.usable in (True, False, "probe-required", "arch-unsupported")
    assert result.probe["ran"] is False
    assert [d.index for d in result.devices] == list(range(len(result.devices)))
    for d in result.devices:
        assert d.vendor in ("amd", "nvidia")
        assert d.memory_bytes is None or d.memory_bytes > 0
    if result.backend != "cpu":
        assert result.usable_devices or result.usable == "probe-required"
    data = result.to_dict()
    text = json.dumps(data)
    assert GpuEnv.from_dict(json.loads(text)).to_dict() == json.loads(text)
