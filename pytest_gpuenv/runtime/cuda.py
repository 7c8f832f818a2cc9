"""The CUDA runtime object: the CUDA driver API through cuda.bindings (cuda-python >= 12).

``CudaRuntime(device)`` retains the device's primary context (the one torch and the CUDA runtime
use) and makes it current; ``load`` and ``launch`` make it current again, so a kernel runs on its
device whatever the thread did in between. Every binding call returns ``(err, *values)``; ``_check``
turns a non-zero ``err`` into ``KernelLaunchError`` with the driver's error name and message and the
call that failed. The binding is imported when the object is made: importing this module starts nothing.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from pytest_gpuenv.runtime._common import (
    Function,
    cooperative_too_large,
    launch_error,
    stream_handle,
    text,
    unpack,
)

#: dynamic shared memory a kernel may use without opting in (cuFuncSetAttribute)
DEFAULT_SHARED = 48 * 1024


class CudaRuntime:
    backend = "cuda"
    vendor = "nvidia"

    def __init__(self, device: int, driver: Any = None) -> None:
        if driver is None:
            from cuda.bindings import driver as binding

            driver = binding
        self.driver = d = driver
        self.device = device
        #: CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, asked at the first cooperative launch
        self._cooperative: Optional[bool] = None
        self._check(d.cuInit(0), "cuInit")
        self.dev = self._check(d.cuDeviceGet(device), f"cuDeviceGet({device})")
        self.ctx = self._check(d.cuDevicePrimaryCtxRetain(self.dev), "cuDevicePrimaryCtxRetain")
        self._current()

    def _check(self, result: Any, what: str) -> Any:
        err = result[0] if isinstance(result, tuple) else result
        if int(err) != 0:
            d = self.driver
            name = text(d.cuGetErrorName(err)[1]) or str(err)
            raise launch_error(self.backend, name, text(d.cuGetErrorString(err)[1]), what)
        return unpack(result)

    def _current(self) -> None:
        self._check(self.driver.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")

    # ------------------------------------------------------------------------------- kernels
    def load(self, binary: bytes, name: str) -> Function:
        """Load a cubin (or fatbin, PTX) and look up the kernel ``name`` in it."""
        self._current()
        module = self._check(self.driver.cuModuleLoadData(binary), "cuModuleLoadData")
        handle = self._check(self.driver.cuModuleGetFunction(module, name.encode()), f"cuModuleGetFunction({name!r})")
        return Function(handle, module, name)

    def load_module(self, binary: bytes) -> Any:
        """cuModuleLoadData on a cubin (or fatbin, PTX)."""
        self._current()
        return self._check(self.driver.cuModuleLoadData(binary), "cuModuleLoadData")

    def get_function(self, module: Any, name: str) -> Function:
        """Kernel ``name`` (its lowered name) of a module ``load_module`` loaded."""
        self._current()
        handle = self._check(self.driver.cuModuleGetFunction(module, name.encode()), f"cuModuleGetFunction({name!r})")
        return Function(handle, module, name)

    def get_global(self, module: Any, name: str) -> tuple[int, int]:
        """(device address, bytes) of the ``__constant__``/``__device__`` variable ``name`` of a loaded module."""
        self._current()
        dptr, nbytes = self._check(self.driver.cuModuleGetGlobal(module, name.encode()), f"cuModuleGetGlobal({name!r})")
        return int(dptr), int(nbytes)

    def stream(self, stream: Any) -> int:
        return stream_handle(stream, self.device)

    def launch(
        self, func: Function, grid: tuple[int, int, int], block: tuple[int, int, int], args_address: int,
        shared_mem: int = 0, stream: Any = None, cooperative: bool = False,
    ) -> int:
        """Enqueue ``func`` with the ``void*[]`` at ``args_address``; returns the stream handle used.

        ``cooperative``: launch with ``cuLaunchCooperativeKernel`` (cuda.bindings.driver, cuda-python 13:
        ``(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
        kernelParams)``, no ``extra``), under which ``cooperative_groups::this_grid().sync()`` works."""
        d = self.driver
        self._current()
        if shared_mem > DEFAULT_SHARED and shared_mem > func.max_shared:
            attr = d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            self._check(d.cuFuncSetAttribute(func.handle, attr, shared_mem), "cuFuncSetAttribute")
            func.max_shared = shared_mem
        h = self.stream(stream)
        if cooperative:
            self._cooperative_supported(func)
            result = d.cuLaunchCooperativeKernel(func.handle, *grid, *block, shared_mem, d.CUstream(h), args_address)
            err = result[0] if isinstance(result, tuple) else result
            if int(err) == int(d.CUresult.CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE):
                raise self._too_large(func, grid, block, shared_mem)
            self._check(result, "cuLaunchCooperativeKernel")
            return h
        self._check(
            d.cuLaunchKernel(func.handle, *grid, *block, shared_mem, d.CUstream(h), args_address, 0),
            "cuLaunchKernel",
        )
        return h

    def _cooperative_supported(self, func: Function) -> None:
        """KernelLaunchError (not sticky) where the device cannot do a cooperative launch."""
        if self._cooperative is None:
            self._cooperative = bool(self._attr("CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH"))
        if not self._cooperative:
            raise launch_error(self.backend, "CUDA_ERROR_NOT_SUPPORTED",
                               f"device {self.device} cannot do a cooperative launch "
                               f"(CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH is 0) of kernel {func.name!r}; nothing ran",
                               "cuLaunchCooperativeKernel", sticky=False)

    def _too_large(
        self, func: Function, grid: tuple[int, int, int], block: tuple[int, int, int], shared_mem: int,
    ) -> Exception:
        """The error for CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE: the driver refused the launch before it ran
        (the context is fine). The limit, as cuLaunchCooperativeKernel's documentation gives it:
        cuOccupancyMaxActiveBlocksPerMultiprocessor(f, threads per block, dynamic shared memory) times
        CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT."""
        d = self.driver
        threads = block[0] * block[1] * block[2]
        try:
            per_sm = int(self._check(d.cuOccupancyMaxActiveBlocksPerMultiprocessor(func.handle, threads, shared_mem),
                                     "cuOccupancyMaxActiveBlocksPerMultiprocessor"))
            sms = self._attr("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT")
            limit = f"{per_sm * sms} ({per_sm} per multiprocessor x {sms} multiprocessors)"
        except Exception as exc:  # the refusal is the error to raise; the limit is only its explanation
            limit = f"unknown ({exc})"
        return cooperative_too_large(self.backend, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", "cuLaunchCooperativeKernel",
                                     self.device, func, grid, block, shared_mem, limit, "context")

    def launcher(
        self, func: Function, grid: tuple[int, int, int], block: tuple[int, int, int], args: Any,
        stream: Any = None,
    ) -> Callable[[], None]:
        """``launch`` of ``func`` with fixed arguments on ``stream``, made once: each call is one
        cuLaunchKernel (never cooperative: perf batches), with no context made current again and no stream
        object built, so a call costs the host less than ``launch`` (figures: docs/explanation/timer.md).
        For a caller that keeps this device's context current between the calls, as a perf batch on torch's
        stream does when this device is torch's current one (torch's device guards restore the context
        around each op). ``args``: the packed arguments (``Kernel.pack``), held by the launcher for as long
        as it lives (their ``void*[]`` is what the driver reads); the memory they point to is the caller's
        to keep."""
        d = self.driver
        self._current()
        s = d.CUstream(self.stream(stream))
        launch, h, (gx, gy, gz), (bx, by, bz) = d.cuLaunchKernel, func.handle, grid, block
        address = args.address

        def run(args: Any = args) -> None:  # the default holds the packed arguments
            result = launch(h, gx, gy, gz, bx, by, bz, 0, s, address, 0)
            if int(result[0]) != 0:
                self._check(result, "cuLaunchKernel")

        return run

    def fencer(self, ptr: int, stream: Any = None) -> Callable[[], None]:
        """A memory fence on ``stream``, made once: each call is one ``cuStreamWriteValue32`` of 1 to the
        device word at ``ptr`` with the default flags, under which the write waits for the stream's earlier
        work and comes after a memory fence (``CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER`` would drop it).
        Little host time and no kernel: CUPTI keeps no record of it. Like ``launcher``, for a caller that
        keeps this device's context current."""
        d = self.driver
        s, p, write = d.CUstream(self.stream(stream)), d.CUdeviceptr(ptr), d.cuStreamWriteValue32

        def run() -> None:
            result = write(s, p, 1, 0)
            if int(result[0]) != 0:
                self._check(result, "cuStreamWriteValue32")

        return run

    def synchronize(self, stream: int = 0) -> None:
        """Wait for ``stream``; a fault of a kernel on it surfaces here (and names the running test)."""
        d = self.driver
        self._check(d.cuStreamSynchronize(d.CUstream(stream)), "kernel execution (cuStreamSynchronize)")

    # -------------------------------------------------------------------------------- memory
    def malloc(self, nbytes: int) -> int:
        self._current()
        return int(self._check(self.driver.cuMemAlloc(nbytes), "cuMemAlloc"))

    def memset(self, ptr: int, nbytes: int, stream: int = 0) -> None:
        """Zero ``nbytes`` at ``ptr``, enqueued on ``stream``."""
        d = self.driver
        self._check(d.cuMemsetD8Async(d.CUdeviceptr(ptr), 0, nbytes, d.CUstream(stream)), "cuMemsetD8Async")

    def memcpy(self, dst: int, src: int, nbytes: int, stream: int = 0) -> None:
        """Device-to-device copy, enqueued on ``stream``."""
        d = self.driver
        self._check(d.cuMemcpyDtoDAsync(d.CUdeviceptr(dst), d.CUdeviceptr(src), nbytes, d.CUstream(stream)),
                    "cuMemcpyDtoDAsync")

    # -------------------------------------------------------------------------------- events
    def event_create(self) -> Any:
        return self._check(self.driver.cuEventCreate(self.driver.CUevent_flags.CU_EVENT_DEFAULT), "cuEventCreate")

    def event_record(self, event: Any, stream: int = 0) -> None:
        self._check(self.driver.cuEventRecord(event, self.driver.CUstream(stream)), "cuEventRecord")

    def event_synchronize(self, event: Any) -> None:
        self._check(self.driver.cuEventSynchronize(event), "cuEventSynchronize")

    def event_elapsed_s(self, start: Any, end: Any) -> float:
        return float(self._check(self.driver.cuEventElapsedTime(start, end), "cuEventElapsedTime")) * 1e-3

    # -------------------------------------------------------------------------------- device
    def _attr(self, name: str) -> int:
        a = getattr(self.driver.CUdevice_attribute, name)
        return int(self._check(self.driver.cuDeviceGetAttribute(a, self.dev), "cuDeviceGetAttribute"))

    def describe(self) -> dict[str, Any]:
        """name, arch, l2_bytes, sm_count, uuid (the 16 raw bytes), pci_bus_id and runtime of the device."""
        d = self.driver
        name = self._check(d.cuDeviceGetName(256, self.dev), "cuDeviceGetName")
        uuid = self._check(d.cuDeviceGetUuid(self.dev), "cuDeviceGetUuid")
        ver = int(self._check(d.cuDriverGetVersion(), "cuDriverGetVersion"))
        major = self._attr("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR")
        minor = self._attr("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR")
        pci = "{:08x}:{:02x}:{:02x}.0".format(
            self._attr("CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID"), self._attr("CU_DEVICE_ATTRIBUTE_PCI_BUS_ID"),
            self._attr("CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID"),
        )
        return {
            "name": text(bytes(name)),
            "arch": f"sm_{major}{minor}",
            "l2_bytes": self._attr("CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE") or None,
            "sm_count": self._attr("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
            "uuid": bytes(getattr(uuid, "bytes", b"")),
            "pci_bus_id": pci,
            "runtime": f"cuda driver {ver // 1000}.{(ver % 1000) // 10}",
        }

    def timer_hz(self) -> float:
        """Ticks per second of the device clock the timer helpers read (``%globaltimer``: nanoseconds)."""
        return 1e9
