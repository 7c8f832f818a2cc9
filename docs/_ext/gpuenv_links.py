"""External links cannot be reached from CI: check that each is well-formed (scheme, host) instead, so a
typo such as ``htps://`` or ``https:/x`` fails the build (which runs with warnings as errors). Internal links
are Sphinx's and MyST's own (``myst.xref_missing``)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from docutils import nodes
from sphinx.util import logging

logger = logging.getLogger(__name__)


def problem(uri: str) -> str | None:
    """Why ``uri`` is not a well-formed external link, or None."""
    parts = urlsplit(uri)
    if parts.scheme in ("http", "https"):
        host = parts.hostname or ""
        if "." not in host.strip("."):
            return "no host name"
        if any(c.isspace() for c in uri):
            return "white space in the address"
        return None
    if parts.scheme == "mailto":
        return None if "@" in parts.path else "no address"
    return f"unexpected scheme {parts.scheme!r}" if parts.scheme else None


def _check(app: Any, doctree: nodes.document, docname: str) -> None:
    for ref in doctree.findall(nodes.reference):
        uri = ref.get("refuri", "")
        if ":" in uri.split("/")[0] and not uri.startswith("#"):
            why = problem(uri)
            if why:
                logger.warning("malformed external link %r: %s", uri, why, location=ref)


def setup(app: Any) -> dict[str, Any]:
    app.connect("doctree-resolved", _check)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
