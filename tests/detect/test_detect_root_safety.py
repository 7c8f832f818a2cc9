"""Each attack on ``--gpuenv-root`` trees,
reproduced. A root is read as after ``chroot``: links and ``..`` never lead out of it; FIFOs, device
nodes, link loops and huge sparse files never hang or fill memory; a number that is not a u64 loses its
node only; HSA_OVERRIDE_GFX_VERSION takes what libhsakmt's ``%u.%u.%u`` takes, in ASCII digits."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from _checkout import REPO

from pytest_gpuenv.base.model import Usability
from pytest_gpuenv.cli import main as gpuenv_main
from pytest_gpuenv.detect import detect

TOPO = "sys/devices/virtual/kfd/kfd/topology"
SECRET = "TOPSECRET-4f1c9a"


def props(minor: int, uid: int, gfx: int = 90402, device_id: int = 4660) -> str:
    return (f"cpu_cores_count 0\nsimd_count 304\ngfx_target_version {gfx}\nvendor_id 4098\n"
            f"device_id {device_id}\nlocation_id {minor * 256}\ndomain 0\ndrm_render_minor {minor}\n"
            f"unique_id {uid}\nwave_front_size 64\n")


def write(root: Path, rel: str, text: str, mode: int = 0o644) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def link(root: Path, rel: str, target: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    path.symlink_to(target)
    return path


def gpu_tree(root: Path, nodes: tuple[int, ...] = (1, 2), gfx: int = 90402) -> Path:
    """A ROCm machine: a CPU node 0 and healthy GPU nodes (render minors 128, 129...), /dev access for all."""
    write(root, "sys/module/amdgpu/initstate", "live\n")
    link(root, "sys/class/kfd/kfd", "../../devices/virtual/kfd/kfd")
    write(root, f"{TOPO}/nodes/0/gpu_id", "0\n")
    write(root, f"{TOPO}/nodes/0/properties", "cpu_cores_count 16\nsimd_count 0\n")
    for n in nodes:
        base = f"{TOPO}/nodes/{n}"
        write(root, f"{base}/gpu_id", f"{51000 + n}\n")
        write(root, f"{base}/properties", props(127 + n, 1000 + n, gfx))
        write(root, f"{base}/name", "ip discovery\n")
        write(root, f"{base}/mem_banks/0/properties", "heap_type 1\nsize_in_bytes 17163091968\n")
        write(root, f"dev/dri/renderD{127 + n}", "", 0o666)
    write(root, "dev/kfd", "", 0o666)
    return root


def host_rocm(tmp_path: Path) -> Path:
    """A ROCm 9.9.9 install (with hipcc) outside the root: what a planted link must not reach."""
    home = tmp_path / "host" / "opt" / "rocm-9.9.9"
    write(home, ".info/version", "9.9.9-999\n")
    write(home, "lib/libamdhip64.so.6", "")
    write(home, "bin/hipcc", "#!/bin/sh\n", 0o755)
    return home


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


def uuids(env) -> list:
    return [d.uuid for d in env.devices]


# ------------------------------------------------------------------------------ item 2: links, ..
def test_absolute_link_to_a_host_rocm_is_read_inside_the_root(root, tmp_path):
    home = host_rocm(tmp_path)
    link(root, "opt/rocm", str(home))
    env = detect(root=str(root), environ={"PATH": "/usr/bin"})
    assert env.rocm["version"] is None and env.rocm["path"] is None
    assert env.compilers["hipcc"] is None
    # the same absolute target is followed inside the root, as chroot would
    write(root / str(home).lstrip("/"), ".info/version", "1.2.3\n")
    env = detect(root=str(root), environ={"PATH": "/usr/bin"})
    assert (env.rocm["path"], env.rocm["version"]) == ("/opt/rocm", "1.2.3")


def test_dotdot_link_is_clamped_at_the_root(root, tmp_path):
    home = host_rocm(tmp_path)
    link(root, "opt/rocm", "../" * 40 + str(home).lstrip("/"))
    env = detect(root=str(root), environ={})
    assert env.rocm["version"] is None
    write(root / str(home).lstrip("/"), ".info/version", "1.2.3\n")
    assert detect(root=str(root), environ={}).rocm["version"] == "1.2.3"


def test_absolute_link_to_a_host_topology_finds_no_gpu(root, tmp_path):
    host = gpu_tree(tmp_path / "host")
    write(root, "sys/module/amdgpu/initstate", "live\n")
    link(root, "sys/class/kfd/kfd", str(host / "sys/devices/virtual/kfd/kfd"))
    link(root, "dev", str(host / "dev"))
    env = detect(root=str(root), environ={})
    assert env.devices == [] and env.backend == "cpu"


@pytest.mark.parametrize("how", ["absolute", "dotdot", "dir"])
def test_node_name_linked_to_a_secret_is_not_printed(root, tmp_path, capsys, how):
    secret = write(tmp_path, "outside/secret.txt", SECRET + "\n")
    gpu_tree(root)
    name = f"{TOPO}/nodes/1/name"
    (root / name).unlink()
    if how == "absolute":
        link(root, name, str(secret))
    elif how == "dotdot":
        link(root, name, "../" * 40 + str(secret).lstrip("/"))
    else:  # a folder on the way is the link
        shutil.rmtree(root / f"{TOPO}/nodes/1")
        write(secret.parent, "gpu_id", "51001\n")
        write(secret.parent, "properties", props(128, 1001))
        write(secret.parent, "name", SECRET + "\n")
        link(root, f"{TOPO}/nodes/1", str(secret.parent))
    assert gpuenv_main(["info", "--root", str(root)]) == 0
    assert gpuenv_main(["info", "--json", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert SECRET not in out
    assert SECRET not in json.dumps(detect(root=str(root), environ={}).to_dict())


def test_link_inside_the_root_still_works(root):
    """Relative and absolute links that stay inside are followed (the machine trees use both)."""
    gpu_tree(root, nodes=(1,))
    write(root, "opt/rocm-6.4.1/.info/version", "6.4.1\n")
    link(root, "opt/rocm", "/opt/rocm-6.4.1")
    link(root, "etc/alternatives/rocm", "../../opt/rocm/")
    env = detect(root=str(root), environ={"ROCM_PATH": "/etc/alternatives/rocm"})
    assert env.rocm["version"] == "6.4.1" and env.rocm["path"] == "/etc/alternatives/rocm"
    assert env.backend == "rocm" and uuids(env) == [f"GPU-{1001:016x}"]


# ------------------------------------------------------------------------------ item 2: environment
def test_rocm_path_with_dotdot_stays_in_the_root(root, tmp_path):
    home = host_rocm(tmp_path)
    up = "/.." * 40 + str(home)
    env = detect(root=str(root), environ={"ROCM_PATH": up, "PATH": "/.." * 40 + str(home / "bin")})
    assert env.rocm["version"] is None and env.compilers["hipcc"] is None
    write(root, "opt/rocm-1.2.3/.info/version", "1.2.3\n")
    for value in ("/../../opt/rocm-1.2.3", "/opt/../opt/./rocm-1.2.3/", "/usr/../../opt/rocm-1.2.3"):
        (root / "usr").mkdir(exist_ok=True)
        assert detect(root=str(root), environ={"ROCM_PATH": value}).rocm["version"] == "1.2.3", value


def test_virtual_env_with_dotdot_stays_in_the_root(root, tmp_path):
    venv = tmp_path / "host" / "venv"
    torch_py = "__version__ = '9.9.9+rocm9.9'\ncuda: Optional[str] = None\nhip: Optional[str] = '9.9'\n"
    write(venv, "lib/python3.11/site-packages/torch/version.py", torch_py)
    assert detect(root=str(root), environ={"VIRTUAL_ENV": "/.." * 40 + str(venv)}).torch is None
    write(root, "venv/lib/python3.11/site-packages/torch/version.py", torch_py.replace("9.9.9", "2.7.1"))
    env = detect(root=str(root), environ={"VIRTUAL_ENV": "/../../venv"})
    assert env.torch["version"] == "2.7.1+rocm9.9"


def test_empty_root_means_the_real_system():
    assert detect(root="", probe="never").root == "/"


# ------------------------------------------------------------------------------ item 8: special files
_RUN = r"""
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
from pytest_gpuenv.detect import detect
env = detect(root=sys.argv[1], environ={"VIRTUAL_ENV": "/venv", "ROCM_PATH": "/opt/fifo"})
print(json.dumps(env.to_dict()))
"""


def _detect_bounded(root: Path) -> dict:
    """detect() in a child limited to 2 GiB of address space and 60 s: a hang or a big read fails here."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", _RUN, str(root)], capture_output=True, text=True, timeout=60,
                          env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_fifos_devices_loops_and_sparse_files_do_not_hang(root):
    gpu_tree(root, nodes=(1, 2, 3, 4, 5, 6))
    n = f"{TOPO}/nodes"
    for rel in (f"{n}/2/properties", f"{n}/2/name", "opt/rocm/.info/version", "opt/fifo",
                "venv/lib/python3.11/site-packages/torch/version.py", "proc/sys/kernel/osrelease"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        if (root / rel).exists():
            (root / rel).unlink()
        os.mkfifo(root / rel)
    (root / f"{n}/3/properties").unlink()
    try:
        os.mknod(root / f"{n}/3/properties", stat.S_IFCHR | 0o666, os.makedev(1, 5))  # /dev/zero
    except (PermissionError, OSError):
        link(root, f"{n}/3/properties", "/dev/zero")  # absolute: re-rooted, so missing
    with open(root / f"{n}/4/properties", "r+b") as f:
        f.truncate(20 << 30)  # 20 GiB, sparse: its first 64 KiB are read (the properties, then NULs)
    with open(root / "sys/module/amdgpu/version", "wb") as f:
        f.truncate(20 << 30)
    link(root, f"{n}/5/properties", "properties")
    link(root, f"{n}/5/gpu_id", "/" + f"{n}/5/gpu_id2")
    link(root, f"{n}/5/gpu_id2", "gpu_id")
    link(root, f"{n}/6/mem_banks", ".")
    link(root, "usr/lib/loop", "../lib/loop/x")
    link(root, "usr/local/lib/python3.11", "/usr/local/lib")
    data = _detect_bounded(root)
    codes = [p["code"] for p in data["problems"]]
    assert "detect-internal-error" not in codes
    assert [d["node"] for d in data["devices"]] == [1, 4, 6]
    text = next(p["message"] for p in data["problems"] if p["code"] == "sysfs-unreadable")
    for bad in ("nodes/2/properties", "nodes/3/properties", "nodes/5/gpu_id"):
        assert bad in text


# ------------------------------------------------------------------------------ item 8: numbers
@pytest.mark.parametrize("rel, text", [
    ("mem_banks/0/properties", "heap_type 1\nsize_in_bytes " + "9" * 321 + "\n"),
    ("properties", props(129, 1002) + "unique_id " + "7" * 5000 + "\n"),
    ("properties", props(129, 1002).replace("simd_count 304", "simd_count " + "1" * 4400)),
    ("properties", props(129, 2**64)),
    ("gpu_id", "9" * 30 + "\n"),
], ids=["size-321-digits", "unique-id-5000-digits", "simd-count-4400-digits", "unique-id-2**64", "gpu-id-30-digits"])
def test_a_huge_number_loses_only_its_node(root, capsys, rel, text):
    gpu_tree(root)
    write(root, f"{TOPO}/nodes/2/{rel}", text)
    env = detect(root=str(root), environ={})
    assert "detect-internal-error" not in env.problem_codes
    assert uuids(env) == [f"GPU-{1001:016x}"] and env.backend == "rocm"
    assert f"nodes/2/{rel}" in env.problem("sysfs-unreadable").message
    assert gpuenv_main(["info", "--root", str(root)]) == 0
    assert "gfx942" in capsys.readouterr().out


def test_huge_memory_does_not_crash_the_pytest_header(root, pytester, monkeypatch):
    for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):  # an xdist worker's mask
        monkeypatch.delenv(var, raising=False)
    gpu_tree(root)
    write(root, f"{TOPO}/nodes/2/mem_banks/0/properties", "heap_type 1\nsize_in_bytes " + "9" * 321 + "\n")
    write(root, f"{TOPO}/nodes/1/mem_banks/1/properties", "heap_type 2\nsize_in_bytes " + str(2**63) + "\n")
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest_subprocess(f"--gpuenv-root={root}")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["gpuenv: rocm, 1x AMD GPU gfx942 (gfx942, 8589934608.0 GiB)",
                                 "*could not be parsed: */nodes/2/mem_banks/0/properties*"])


def test_huge_node_folder_names_are_not_parsed(root):
    gpu_tree(root, nodes=(1,))
    write(root, f"{TOPO}/nodes/{'9' * 200}/gpu_id", "51009\n")
    env = detect(root=str(root), environ={})
    assert [d.node for d in env.devices] == [1]


# ------------------------------------------------------------------------------ item 11: override
@pytest.mark.parametrize("value", ["１０.３.０", "١٠.٣.٠", "10.3.٠", "10.3.0x", "64.0.0", "10.256.0", "10.3.256",
                                   "1" * 5000 + ".0.0", "-1.0.0", "10.3.0.0"],
                         ids=["fullwidth", "arabic-indic", "one-non-ascii", "trailing-char", "major-64", "minor-256",
                              "step-256", "5000-digits", "negative", "four-parts"])
def test_override_takes_ascii_digits_in_rocm_range_only(root, value):
    gpu_tree(root, nodes=(1,), gfx=100301)
    env = detect(root=str(root), environ={"HSA_OVERRIDE_GFX_VERSION": value})
    p = env.problem("hsa-override-invalid")
    assert p is not None and p.severity == "error"
    assert env.devices[0].arch == "gfx1031" and env.usable is Usability.UNUSABLE
    assert len(p.message) < 400


@pytest.mark.parametrize("value, arch", [("10.3.0", "gfx1030"), ("010.03.000", "gfx1030"), ("63.255.255", None)])
def test_override_in_range_is_applied(root, value, arch):
    gpu_tree(root, nodes=(1,), gfx=100301)
    env = detect(root=str(root), environ={"HSA_OVERRIDE_GFX_VERSION": value})
    assert "hsa-override-invalid" not in env.problem_codes
    if arch:
        assert env.devices[0].arch == arch


def test_per_node_override_with_non_ascii_digits_is_ignored(root):
    gpu_tree(root, nodes=(1,), gfx=100301)
    env = detect(root=str(root), environ={"HSA_OVERRIDE_GFX_VERSION_1": "١٠.٣.٠"})
    assert env.devices[0].arch == "gfx1031"
