"""torch's build flavour from ``torch/version.py`` read as text (torch is never imported)."""

from __future__ import annotations

from typing import Any, Optional

from pytest_gpuenv.detect._fs import Fs

_SITE_GLOBS = (
    "/opt/*/lib/python3*/site-packages",
    "/opt/*/*/lib/python3*/site-packages",
    "/usr/local/lib/python3*/site-packages",
    "/usr/local/lib/python3*/dist-packages",
    "/usr/lib/python3*/site-packages",
    "/usr/lib/python3/dist-packages",
    "/usr/lib/python3*/dist-packages",
    "/root/.local/lib/python3*/site-packages",
    "/home/*/.local/lib/python3*/site-packages",
    "/venv/lib/python3*/site-packages",
)


def find_version_py(fs: Fs, environ: Any) -> Optional[str]:
    """Path (as the examined system names it) of torch/version.py, or None."""
    if not fs.root_mode:
        try:
            import importlib.util

            spec = importlib.util.find_spec("torch")
        except (ImportError, ValueError, AttributeError):
            return None
        if spec is None:
            return None
        locs = list(spec.submodule_search_locations or [])
        for loc in locs:
            path = loc.rstrip("/") + "/version.py"
            if fs.isfile(path):
                return path
        return None
    import glob

    venv = environ.get("VIRTUAL_ENV") or environ.get("CONDA_PREFIX")
    patterns = [glob.escape(venv.rstrip("/")) + "/lib/python3*/site-packages"] if venv and venv.startswith("/") else []
    for pat in patterns + list(_SITE_GLOBS):
        for path in fs.glob(pat + "/torch/version.py"):
            return path
    return None


#: the fields read, each from its first ``name = 'text'`` / ``"text"`` / ``None`` at the start of a line (an
#: annotation allowed: ``cuda: Optional[str] = None``)
_NAMES = ("__version__", "hip", "cuda", "xpu")


def _fields(text: str) -> dict[str, Optional[str]]:
    """The first assignment of each field (a string, or None for ``None``); other assignments are passed over."""
    out: dict[str, Optional[str]] = {}
    for line in text.splitlines():
        target, eq, value = line.partition("=")
        name, value = target.partition(":")[0].rstrip(), value.strip()
        if not eq or name not in _NAMES or name in out:
            continue
        if value.startswith("None"):
            out[name] = None
        elif value[:1] in ("'", '"') and value[0] in value[1:]:
            out[name] = value[1:value.index(value[0], 1)]
    return out


def read_torch(fs: Fs, environ: Any, ev: list[str]) -> Optional[dict[str, Any]]:
    path = find_version_py(fs, environ)
    if path is None:
        return None
    text = fs.read(path, 16384)
    if text is None:
        return None
    fields = _fields(text)
    version = fields.get("__version__")
    if not version:
        ev.append(f"{path}: no __version__")
        return {"version": None, "build": None, "hip": None, "cuda": None, "path": path}
    hip, cuda, xpu = fields.get("hip"), fields.get("cuda"), fields.get("xpu")
    build = "rocm" if hip else "cuda" if cuda else "xpu" if xpu else "cpu"
    ev.append(f"{path}: __version__ {version!r}, hip {hip!r}, cuda {cuda!r}")
    return {"version": version, "build": build, "hip": hip, "cuda": cuda, "path": path}
