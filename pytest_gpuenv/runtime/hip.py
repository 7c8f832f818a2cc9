"""The HIP runtime object: the HIP runtime and module API through hip-python.

``HipRuntime(device)`` selects the device (``hipSetDevice``); ``load`` and ``launch`` select it
again, so a kernel runs on its device whatever the thread did in between. The same calls as
``CudaRuntime``, on the same shape of binding (each call returns ``(err, *values)``); ``_check`` turns
an error into ``KernelLaunchError`` with the runtime's error name and message and the call that
failed. Stream 0 is passed as None (the null stream). The binding is imported when the object is
made: importing this module starts nothing.

Two things differ from CUDA. Before ROCm 7 (and on ROCm 7 with core dumps enabled) a GPU fault aborts
the process instead of coming back as an error, so ``launch`` first tells ``runtime.sticky.before_launch``
(the plugin records the running test durably). And ``hipErrorLaunchFailure`` answered by the launch
call itself means clr refused the launch before anything ran (a block above the kernel's launch
bounds, a cooperative launch the device cannot do): that error is not sticky unless a cheap call on
the device fails too. From HIP 7.0 a queue error is stored process-wide and every later API answers it
(``runtime.sticky.STORED``): a code that may be that stored error is sticky when ``hipGetDevice`` answers it too.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from pytest_gpuenv.runtime import sticky as _sticky
from pytest_gpuenv.runtime._common import (
    Function,
    cooperative_too_large,
    launch_error,
    stream_handle,
    text,
    unpack,
)

#: what hipGetErrorString answers for some codes where it only repeats the name (ROCm 5)
_HIP_MESSAGES = {
    "hipErrorNoDevice": "no ROCm-capable device is detected",
    "hipErrorInvalidDevice": "invalid device ordinal",
    "hipErrorIllegalAddress": "an illegal memory access was encountered",
}


class HipRuntime:
    backend = "rocm"
    vendor = "amd"

    def __init__(self, device: int, hip: Any = None) -> None:
        if hip is None:
            from hip import hip as binding

            hip = binding
        self.hip = hip
        self.device = device
        self._hip_major: Optional[int] = None
        self._select()

    def _check(self, result: Any, what: str) -> Any:
        err = result[0] if isinstance(result, tuple) else result
        if int(err) != 0:
            code = _code(err)
            msg = self.hip.hipGetErrorString(err)
            msg = text(msg[-1] if isinstance(msg, tuple) else msg)
            sticky = True if code in _sticky.stored_codes(self._major()) and self._stored(code) else None
            raise launch_error(self.backend, code, msg if msg and msg != code else _HIP_MESSAGES.get(code, ""), what,
                               sticky=sticky)
        return unpack(result)

    def _major(self) -> Optional[int]:
        """HIP's major version (``hipRuntimeGetVersion`` starts with ``HIP_INIT_API_NO_RETURN``: it answers
        even when the GPU is in error, clr hipamd/src/hip_context.cpp); None where it cannot say."""
        if self._hip_major is None:
            try:
                err, ver = self.hip.hipRuntimeGetVersion()
                self._hip_major = int(ver) // 10000000 if int(err) == 0 and ver else -1
            except (AttributeError, TypeError, ValueError):
                self._hip_major = -1
        return None if self._hip_major < 0 else self._hip_major

    def _stored(self, code: str) -> bool:
        """Whether ``code`` is clr's stored GPU error: ``hipGetDevice`` starts with ``HIP_INIT_API`` (clr
        hipamd/src/hip_device_runtime.cpp), which answers the stored error before anything else."""
        try:
            result = self.hip.hipGetDevice()
        except (AttributeError, TypeError):
            return False
        err = result[0] if isinstance(result, tuple) else result
        return int(err) != 0 and _code(err) == code

    def _select(self) -> None:
        self._check(self.hip.hipSetDevice(self.device), f"hipSetDevice({self.device})")

    # ------------------------------------------------------------------------------- kernels
    def load_module(self, binary: bytes) -> Any:
        """hipModuleLoadData on a code object (an ELF from hiprtc or an offload bundle from hipcc)."""
        return self._check(self.hip.hipModuleLoadData(binary), "hipModuleLoadData")

    def load(self, binary: bytes, name: str) -> Function:
        """Load a code object on the device and look up the kernel ``name`` in it."""
        self._select()
        module = self.load_module(binary)
        handle = self._check(self.hip.hipModuleGetFunction(module, name.encode()), f"hipModuleGetFunction({name!r})")
        return Function(handle, module, name)

    def get_function(self, module: Any, name: str) -> Function:
        """Kernel ``name`` (its lowered name) of a module ``load_module`` loaded."""
        self._select()
        handle = self._check(self.hip.hipModuleGetFunction(module, name.encode()), f"hipModuleGetFunction({name!r})")
        return Function(handle, module, name)

    def get_global(self, module: Any, name: str) -> tuple[int, int]:
        """(device address, bytes) of the ``__constant__``/``__device__`` variable ``name`` of a loaded module."""
        self._select()
        dptr, nbytes = self._check(self.hip.hipModuleGetGlobal(module, name.encode()), f"hipModuleGetGlobal({name!r})")
        return int(dptr), int(nbytes)

    def stream(self, stream: Any) -> int:
        return stream_handle(stream, self.device)

    def launch(
        self, func: Function, grid: tuple[int, int, int], block: tuple[int, int, int], args_address: int,
        shared_mem: int = 0, stream: Any = None, cooperative: bool = False,
    ) -> int:
        """Enqueue ``func`` with the ``void*[]`` at ``args_address``; returns the stream handle used.

        ``cooperative``: launch with ``hipModuleLaunchCooperativeKernel(f, gridDimX, gridDimY, gridDimZ,
        blockDimX, blockDimY, blockDimZ, sharedMemBytes, stream, kernelParams)`` (no ``extra``: hip-python
        6.2.0 hip/hip.pyx; ROCm/clr hipamd/src/hip_module.cpp ``hipModuleLaunchCooperativeKernel``, which
        passes ``amd::NDRangeKernelCommand::CooperativeGroups`` to ``ihipModuleLaunchKernel``). Its
        validation (``ihipLaunchKernel_validate``) answers hipErrorLaunchFailure where the device has no
        cooperative groups and hipErrorCooperativeLaunchTooLarge where the grid's blocks are more than
        ``ihipOccupancyMaxActiveBlocksPerMultiprocessor``'s blocks per grid, both before anything is enqueued.
        """
        h = self.stream(stream)
        self._select()
        _sticky.before_launch(self.backend)
        if cooperative:
            what = "hipModuleLaunchCooperativeKernel"
            result = self.hip.hipModuleLaunchCooperativeKernel(func.handle, *grid, *block, shared_mem, h or None,
                                                               args_address)
        else:
            what = "hipModuleLaunchKernel"
            result = self.hip.hipModuleLaunchKernel(func.handle, *grid, *block, shared_mem, h or None, args_address,
                                                    None)
        err = result[0] if isinstance(result, tuple) else result
        if int(err) != 0:
            code = _code(err)
            if code == "hipErrorLaunchFailure":
                raise self._refused(func, block, what, cooperative)
            if cooperative and code == "hipErrorCooperativeLaunchTooLarge":
                raise self._too_large(func, grid, block, shared_mem)
        self._check(result, what)
        return h

    def _refused(
        self, func: Function, block: tuple[int, int, int], what: str = "hipModuleLaunchKernel", cooperative: bool = False,
    ) -> Exception:
        """The error for hipErrorLaunchFailure answered by the launch call itself.

        clr's launch validation (hipamd/src/hip_module.cpp, ``ihipLaunchKernel_validate``) returns it
        before anything is enqueued for a block larger than the kernel's launch bounds and for a
        cooperative launch the device does not support: nothing ran, the device is fine. A device
        already in error answers every call with its error (clr ``HIP_INIT_API``), so a cheap call,
        ``hipFuncGetAttribute``, tells the two apart: if it fails, that error is raised (and recorded).
        """
        attr = self.hip.hipFunction_attribute.HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
        limit = int(self._check(self.hip.hipFuncGetAttribute(attr, func.handle),
                                "hipFuncGetAttribute after hipErrorLaunchFailure"))
        threads = block[0] * block[1] * block[2]
        if limit and threads > limit:
            why = (f"block {block[0]}x{block[1]}x{block[2]} ({threads} threads) is larger than the launch bounds "
                   f"of kernel {func.name!r} ({limit} threads per block)")
        elif cooperative and self._device_attr("hipDeviceAttributeCooperativeLaunch") == 0:
            why = (f"device {self.device} cannot do a cooperative launch (hipDeviceAttributeCooperativeLaunch is 0) "
                   f"of kernel {func.name!r}")
        elif cooperative:
            why = f"the runtime refused the cooperative launch of kernel {func.name!r} before it ran"
        else:
            why = f"the runtime refused to launch kernel {func.name!r} before it ran"
        return launch_error(self.backend, "hipErrorLaunchFailure", why + "; nothing ran, the device is still usable",
                            what, sticky=False)

    def _too_large(
        self, func: Function, grid: tuple[int, int, int], block: tuple[int, int, int], shared_mem: int,
    ) -> Exception:
        """The error for hipErrorCooperativeLaunchTooLarge: clr refused the launch before it ran (the device
        is fine). The limit: hipModuleOccupancyMaxActiveBlocksPerMultiprocessor times the device's compute
        units, as clr computes blocks per grid (where the runtime cannot say, the message says so)."""
        threads = block[0] * block[1] * block[2]
        limit = "unknown"
        try:
            result = self.hip.hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(func.handle, threads, shared_mem)
            per_cu = int(self._check(result, "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor"))
            cus = self._device_attr("hipDeviceAttributeMultiprocessorCount")
            if cus is not None:
                limit = f"{per_cu * cus} ({per_cu} per compute unit x {cus} compute units)"
        except Exception as exc:  # the refusal is the error to raise; the limit is only its explanation
            limit = f"unknown ({exc})"
        return cooperative_too_large(self.backend, "hipErrorCooperativeLaunchTooLarge", "hipModuleLaunchCooperativeKernel",
                                     self.device, func, grid, block, shared_mem, limit, "device")

    def _device_attr(self, name: str) -> Optional[int]:
        """``hipDeviceGetAttribute`` of this device (None where the runtime cannot say)."""
        try:
            attr = getattr(self.hip.hipDeviceAttribute_t, name)
            result = self.hip.hipDeviceGetAttribute(attr, self.device)
        except (AttributeError, TypeError):
            return None
        if int(result[0] if isinstance(result, tuple) else result) != 0:
            return None
        return int(unpack(result))

    def synchronize(self, stream: int = 0) -> None:
        """Wait for ``stream``; a fault of a kernel on it surfaces here (and names the running test)."""
        self._check(self.hip.hipStreamSynchronize(stream or None), "kernel execution (hipStreamSynchronize)")

    # -------------------------------------------------------------------------------- memory
    def malloc(self, nbytes: int) -> int:
        self._select()
        return int(self._check(self.hip.hipMalloc(nbytes), "hipMalloc"))

    def memset(self, ptr: int, nbytes: int, stream: int = 0) -> None:
        """Zero ``nbytes`` at ``ptr``, enqueued on ``stream``."""
        self._check(self.hip.hipMemsetAsync(ptr, 0, nbytes, stream or None), "hipMemsetAsync")

    def memcpy(self, dst: int, src: int, nbytes: int, stream: int = 0) -> None:
        """Device-to-device copy, enqueued on ``stream``."""
        self._check(self.hip.hipMemcpyDtoDAsync(dst, src, nbytes, stream or None), "hipMemcpyDtoDAsync")

    # -------------------------------------------------------------------------------- events
    def event_create(self) -> Any:
        return self._check(self.hip.hipEventCreate(), "hipEventCreate")

    def event_record(self, event: Any, stream: int = 0) -> None:
        self._check(self.hip.hipEventRecord(event, stream or None), "hipEventRecord")

    def event_synchronize(self, event: Any) -> None:
        self._check(self.hip.hipEventSynchronize(event), "hipEventSynchronize")

    def event_elapsed_s(self, start: Any, end: Any) -> float:
        return float(self._check(self.hip.hipEventElapsedTime(start, end), "hipEventElapsedTime")) * 1e-3

    # -------------------------------------------------------------------------------- device
    def describe(self) -> dict[str, Any]:
        """name, arch, l2_bytes, sm_count (compute units), uuid (None), pci_bus_id and runtime of the device."""
        hip = self.hip
        props = hip.hipDeviceProp_t()
        self._check(hip.hipGetDeviceProperties(props, self.device), "hipGetDeviceProperties")
        ver = int(self._check(hip.hipRuntimeGetVersion(), "hipRuntimeGetVersion"))
        return {
            "name": text(props.name),
            "arch": text(props.gcnArchName).split(":")[0] or None,
            "l2_bytes": int(props.l2CacheSize) or None,
            "sm_count": int(props.multiProcessorCount),
            "uuid": None,
            "pci_bus_id": self._pci_bus_id(props),
            "runtime": f"hip {ver // 10000000}.{(ver // 100000) % 100}",
        }

    def _pci_bus_id(self, props: Any) -> str:
        """``hipDeviceGetPCIBusId``: its function digit is ROCr's BDFID & 7 (clr hip_device_runtime.cpp,
        rocdevice.cpp ``pcie.function``), which on an MI300 partition is the partition's (amdkfd
        ``kfd_topology_add_device``: ``location_id |= node_id``); the properties carry no function."""
        try:
            bus_id = text(self._check(self.hip.hipDeviceGetPCIBusId(13, self.device), "hipDeviceGetPCIBusId"))
            bus_id = bus_id.split("\0")[0].strip()
        except (AttributeError, TypeError):
            bus_id = ""
        if re.fullmatch(r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]", bus_id):
            return bus_id.lower()
        return f"{int(props.pciDomainID):04x}:{int(props.pciBusID):02x}:{int(props.pciDeviceID):02x}.0"

    def timer_hz(self) -> float:
        """Ticks per second of ``wall_clock64()`` (the device attribute, in kHz; 100 MHz where it says 0)."""
        attr = self.hip.hipDeviceAttribute_t.hipDeviceAttributeWallClockRate
        khz = int(self._check(self.hip.hipDeviceGetAttribute(attr, self.device), "hipDeviceGetAttribute"))
        return khz * 1e3 if khz > 0 else 100e6


def _code(err: Any) -> str:
    """The error's name (``hipErrorLaunchFailure``) from a hip-python enum member, else its text."""
    return getattr(err, "name", None) or str(err)
