"""/dev/kfd and render-node access, as libhsakmt opens them (DETECTION.md step 3b, failure modes A1-A3).

Only ``stat`` and ``os.access``: nothing is opened. ``owner_and_group`` names a device file's owner and
group in the problems here and in ``_nvidia``'s.
"""

from __future__ import annotations

import os
from typing import Optional

from pytest_gpuenv.base.model import Device, Problem
from pytest_gpuenv.detect.fs import Fs


def check_access(
    fs: Fs, devices: list[Device], container: bool, ev: list[str]
) -> tuple[list[Device], list[Problem]]:
    """/dev/kfd and renderD access (stat/os.access only), as libhsakmt opens them. Returns (devices kept, problems).

    libhsakmt (``topology.c`` ``topology_sysfs_check_node_supported``, ``fmm.c``
    ``hsakmt_open_drm_render_device``) skips a GPU node whose render node is missing (ENOENT; the device
    cgroup's EPERM likewise), and fails its whole topology, so that no GPU is visible at all, for
    ``drm_render_minor`` 0 or outside 128-255 and for any other open error, EACCES included.
    """
    if not devices:
        return devices, []
    kfd = _kfd_problem(fs, devices, container, ev)
    if kfd is not None:
        return devices, [kfd]
    ev.append("/dev/kfd: readable+writable")
    kept: list[Device] = []
    denied: list[Device] = []
    no_minor: list[Device] = []
    for d in devices:
        if d.render_node is None:
            no_minor.append(d)
        elif not fs.exists(d.render_node):
            ev.append(f"{d.render_node}: missing (KFD node {d.node} hidden by the device cgroup)")
            continue
        elif not fs.access(d.render_node, os.R_OK | os.W_OK):
            denied.append(d)
        kept.append(d)
    for i, d in enumerate(kept):  # HIP ordinals over the nodes that remain
        d.physical_index = i
        d.index = i
    problems = ([_no_minor_problem(kept, no_minor, ev)] if no_minor else []) + (
        [_denied_problem(fs, kept, denied, ev)] if denied else [])
    return kept, problems


def _topology_failed(kept: list[Device], own: list[Device], own_reason: str, ev: list[str]) -> None:
    """Every device unusable: libhsakmt's topology failed on ``own``."""
    ev.append(f"libhsakmt topology fails: {own_reason}")
    for d in kept:
        if d.usable or d.unusable_reason is None:
            d.usable = False
            d.unusable_reason = own_reason if d in own else f"ROCm sees no GPU: {own_reason}"


def _no_minor_problem(kept: list[Device], no_minor: list[Device], ev: list[str]) -> Problem:
    nodes = ", ".join(str(d.node) for d in no_minor)
    _topology_failed(kept, no_minor, f"KFD node {nodes}: no DRM render node (drm_render_minor 0 or outside 128-255)",
                     ev)
    return Problem(
        "render-minor-invalid",
        f"KFD node(s) {nodes} report no DRM render node (drm_render_minor 0 or outside 128-255); libhsakmt "
        f"then fails its whole topology, so ROCm sees none of the {len(kept)} AMD GPU(s)",
        fix="check `dmesg | grep amdgpu` (the driver did not register the GPU's render node) and update the "
        "kernel/amdgpu driver", severity="error", category="driver")


def _denied_problem(fs: Fs, kept: list[Device], denied: list[Device], ev: list[str]) -> Problem:
    paths = ", ".join(d.render_node or "" for d in denied)
    _topology_failed(kept, denied, f"{paths} not accessible (EACCES)", ev)
    _owner_name, group = owner_and_group(fs.stat(denied[0].render_node or ""))
    user = _user()
    return Problem(
        "render-permission-denied",
        f"{paths} not accessible to user '{user}' (group '{group}'); libhsakmt fails its whole topology on "
        f"EACCES, so ROCm sees none of the {len(kept)} AMD GPU(s), not only these",
        fix=f"`sudo usermod -aG render,video {user}` then log out and in", severity="error", category="permission")


def _kfd_problem(fs: Fs, devices: list[Device], container: bool, ev: list[str]) -> Optional[Problem]:
    """/dev/kfd missing or not readable+writable: every device is unusable, and this says why."""
    archs = ", ".join(sorted({d.physical_arch or "unknown arch" for d in devices}))
    if not fs.exists("/dev/kfd"):
        if container:
            code = "kfd-missing-in-container"
            msg = f"AMD GPU(s) visible in /sys/class/kfd ({archs}) but /dev/kfd is missing in this container"
            fix = ("start the container with `--device /dev/kfd --device /dev/dri` (plus `--group-add` with the "
                   "host's render and video GIDs when not running as root)")
        else:
            code, msg = ("kfd-missing", f"AMD GPU(s) in /sys/class/kfd ({archs}) but /dev/kfd does not exist")
            fix = "reload the driver (`sudo modprobe amdgpu`) or check udev; /dev/kfd is created by amdgpu"
        for d in devices:
            d.usable, d.unusable_reason = False, "/dev/kfd missing"
        ev.append("/dev/kfd: missing")
        return Problem(code, msg, fix=fix, severity="error", category="container" if container else "driver")
    if fs.access("/dev/kfd", os.R_OK | os.W_OK):
        return None
    st = fs.stat("/dev/kfd")
    mode = f"{st.st_mode & 0o777:04o}" if st else "?"
    owner, group = owner_and_group(st)
    user = _user()
    for d in devices:
        d.usable, d.unusable_reason = False, f"/dev/kfd not accessible (user '{user}' not in '{group}')"
    ev.append(f"/dev/kfd: mode {mode} {owner}:{group}, not readable+writable by '{user}'")
    return Problem(
        "kfd-permission-denied",
        f"AMD GPU(s) detected ({archs}) but /dev/kfd is not accessible (mode {mode} {owner}:{group}; "
        f"user '{user}' not in '{group}')",
        fix=f"`sudo usermod -aG render,video {user}` then log out and in (or `newgrp {group}`)", severity="error",
        category="permission")


def owner_and_group(st: Optional[os.stat_result]) -> tuple[str, str]:
    """The names of the owner and group of a device file (the numbers where this machine has no name for
    them; "?" for a file that could not be stat'ed)."""
    if st is None:
        return "?", "?"
    try:
        import pwd

        owner = pwd.getpwuid(st.st_uid).pw_name
    except (KeyError, ImportError):
        owner = str(st.st_uid)
    try:
        import grp

        group = grp.getgrgid(st.st_gid).gr_name
    except (KeyError, ImportError):
        group = str(st.st_gid)
    return owner, group


def _user() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (KeyError, ImportError, AttributeError):
        return os.environ.get("USER") or os.environ.get("USERNAME") or "$USER"
