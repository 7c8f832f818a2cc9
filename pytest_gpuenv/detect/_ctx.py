"""What one detection run shares between its steps: ``_core`` and the per-platform modules fill it."""

from __future__ import annotations

from typing import Any, Optional

from pytest_gpuenv.base.model import Device, GpuEnv, Problem
from pytest_gpuenv.detect.fs import Fs


class Ctx:
    """The ``GpuEnv`` being filled, the file access, the inputs, and what the steps found so far."""

    def __init__(self, env: GpuEnv, fs: Fs, environ: Any, probe: str, timeout: float, cache: Any) -> None:
        self.env, self.fs, self.environ = env, fs, environ
        self.probe_mode, self.timeout, self.cache = probe, timeout, cache
        self.ev = env.evidence
        self.problems = env.problems
        #: the ROCm install (``detect.compilers.rocm_userspace``; on Windows only ``lib_dirs``)
        self.rocm: dict[str, Any] = {}
        #: files cannot list the devices: only the runtime probe can
        self.probe_required = False
        #: the devices of the chosen backend, physical order, before the visible-devices masks
        self.devices: list[Device] = []
        #: torch.cuda.get_arch_list() from the probe, when torch answered
        self.arch_list: Optional[list[str]] = None
        #: physical index -> why ROCr leaves that AMD GPU out (``_rocr.agent_check``)
        self.dropped: dict[int, str] = {}
        #: why NVML gave no facts (``_nvidia.ask_nvml``); None where it answered or was not asked
        self.nvml_why: Optional[str] = None

    def add(self, code: str, message: str, fix: Optional[str], severity: str, category: str) -> None:
        """Report a problem once (the first report of a code wins)."""
        if self.env.problem(code) is None:
            self.problems.append(Problem(code, message, fix=fix, severity=severity, category=category))
