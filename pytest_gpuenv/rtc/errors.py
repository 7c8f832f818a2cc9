"""Errors of the kernel compiler and its cache; the launch error is the runtime layer's, re-exported."""

from __future__ import annotations

from typing import Optional

from pytest_gpuenv.runtime.errors import KernelLaunchError

__all__ = ["CacheDirError", "KernelCompileError", "KernelLaunchError"]


class KernelCompileError(Exception):
    """A kernel could not be compiled: the compiler's log, and the file and line it points at.

    Also raised for a missing kernel file, a kernel name not in the source, an arch no installed
    compiler knows, or a header that cannot be found: each message names the thing.
    """

    __module__ = "pytest_gpuenv.rtc"

    def __init__(
        self,
        message: str,
        *,
        log: str = "",
        file: Optional[str] = None,
        line: Optional[int] = None,
        arch: Optional[str] = None,
        compiler: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.log = log
        self.file = file
        self.line = line
        self.arch = arch
        self.compiler = compiler

    def __str__(self) -> str:
        if self.log and self.log.strip() not in self.message:
            return f"{self.message}\n--- {self.compiler or 'compiler'} log ---\n{self.log.rstrip()}"
        return self.message


class CacheDirError(RuntimeError):
    """The compile cache directory is unsafe: it (or a subfolder) is owned by someone else or writable by
    others, a folder above it lets someone else replace it (owned by another user, or writable by others
    without the sticky bit), or a folder on the way became a symbolic link. Checked on every load and store.
    """

    __module__ = "pytest_gpuenv.rtc"
