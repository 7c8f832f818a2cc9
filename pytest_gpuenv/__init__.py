"""pytest-gpuenv: GPU-aware testing across ROCm, CUDA, WSL 2 and CPU-only runners."""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__"]
