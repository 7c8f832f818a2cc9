"""The reference pages, generated from the package's own tables at every docs build, so they cannot drift.

- options: the rows of ``_options.OPTIONS`` (flag, metavar, environment variable, ini name and type, default,
  help), the table that also registers the options with pytest and resolves them;
- markers: ``markers.MARKERS`` (each row's signature, alias and help);
- fixtures: the fixtures pytest finds in ``pytest_gpuenv.plugin`` (name, scope, docstring), and the options of
  ``hip_kernel`` (``hip_kernel_options``: the fixture's option table, ``fixtures/kernel_options.py``);
- command line: ``gpuenv ... --help`` as argparse prints it, for each command and subcommand;
- problem codes: every ``Problem(...)`` and ``ctx.add(...)`` in the package's source, read with ``ast``
  (code, severity, category, fix; ``{name}`` marks what the fix fills in at run time).

A Sphinx extension (``builder-inited`` writes ``docs/reference/*.md``, which git ignores) and a script:
``python docs/_ext/gpuenv_reference.py OUTDIR``. Imports no Sphinx at module level (tests/packaging/test_docs.py
imports it).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import inspect
import io
import os
import re
import sys
from pathlib import Path
from typing import Any

PACKAGE = "pytest_gpuenv"
_CODE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)+$")


def _cell(text: Any) -> str:
    """A Markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return out


def options_page() -> list[str]:
    from pytest_gpuenv.session.options import OPTIONS

    rows = []
    for opt in OPTIONS:
        flag = f"`{opt.flag}" + (f"={opt.metavar}`" if opt.metavar else "`") if opt.cli else "- (ini only)"
        rows.append([flag, f"`{opt.env}`" if opt.env else "-", f"`{opt.name}` ({opt.ini})" if opt.ini else "-",
                     _fmt_default(opt.default), opt.help])
    return [
        "# Options", "",
        "Generated at build time from the option table (`OPTIONS` in `pytest_gpuenv/session/options.py`), which also",
        "registers the options with pytest. Lookup order: the command line, then the environment variable",
        "(an empty one counts as unset), then the ini file (`pytest.ini`, `tox.ini`,",
        "`setup.cfg` or `pyproject.toml`), then the default. A bad value is a `pytest.UsageError` naming the",
        "value and where it came from. List options take a TOML array in `pyproject.toml`, and commas or",
        "spaces elsewhere (`gpuenv_compile_archs = [\"gfx90a\", \"sm_90\"]` under `[tool.pytest.ini_options]` or",
        "`[tool.pytest]`; `gpuenv_compile_archs = gfx90a, sm_90` in `pytest.ini`; `GPUENV_COMPILE_ARCHS=\"gfx90a sm_90\"`).",
        "Paths are checked before any test: a `--gpuenv-json` target that is a directory or a FIFO, or whose",
        "folder is read-only or cannot be created, a `--gpuenv-cache-dir` that is not a writable directory (or",
        "cannot be made), a `gpuenv_kernel_dirs` entry that is missing. What the output options write:",
        "{doc}`outputs`. Write an option's value with `=` (`--gpuenv-cache-dir=PATH`): pytest chooses the rootdir",
        "before it knows the plugin's options, and takes a separate value that is an existing path for a test path",
        "(the plugin warns when it did).", "",
        *_table(["command line", "environment", "ini (type)", "default", "meaning"], rows), "",
        *_other_variables(),
    ]


def _other_variables() -> list[str]:
    """The environment variables that are not options (read where they apply, each named by its constant)."""
    from pytest_gpuenv.runtime import cpu
    from pytest_gpuenv.runtime.cpu import protocol

    rows = [
        [f"`{cpu.WORKERS_ENV}`", "`0` (one per core)",
         f"threads that run the blocks of an unchecked CPU-executor launch, 1 to {protocol.MAX_WORKERS}: "
         "{doc}`../explanation/cpu-executor`"],
        [f"`{cpu.WATCHDOG_ENV}`", "`10`",
         f"seconds one CPU-executor launch may run, above 0 and at most {cpu.WATCHDOG_MAX:g}"],
        ["`GPUENV_LOCK_DIR`", "a per-user temp folder",
         "the per-GPU and per-host lock files (measurements, xdist workers' GPUs): {doc}`../how-to/several-hosts`"],
    ]
    return ["## Other environment variables", "",
            "Not options (no command line or ini twin); a bad value is an error naming it, in the tests or workers that read it.", "",
            *_table(["environment", "default", "meaning"], rows), ""]


def _fmt_default(default: Any) -> str:
    if default in (None, "", [], (), False):
        return "-"
    return f"`{default}`"


def markers_page() -> list[str]:
    from pytest_gpuenv.marks import dtypes, markers

    rows = [[f"`{m.signature}`", f"`{m.alias}`", m.help] for m in markers.MARKERS]
    rows.append([f"`{dtypes.SIGNATURE}`", "-", dtypes.HELP])  # parametrizes: no alias, no skip of its own
    # the markers that exist only with the prefix (the leak check's, the sanitizer's, the tolerances'): "sig: help"
    rows += [[f"`{line.split('): ', 1)[0]})`", "", line.split("): ", 1)[1]] for line in markers.PREFIXED_ONLY]
    return [
        "# Markers", "",
        "Generated from `pytest_gpuenv/marks/markers.py` at build time: what `pytest --markers` prints. Each",
        "marker is importable as a decorator (`from pytest_gpuenv import requires_rocm`). The prefixed",
        "alias always means the plugin's marker; an unprefixed name that the suite registers itself is left",
        "to the suite (the header says so). A bad argument makes that one test an error naming the marker",
        "and the value.", "",
        *_table(["marker", "alias", "meaning"], rows), "",
    ]


def fixtures_page() -> list[str]:
    from _pytest.fixtures import getfixturemarker

    plugin = importlib.import_module(f"{PACKAGE}.plugin")
    rows = []
    for attr, obj in sorted(vars(plugin).items()):
        marker = getfixturemarker(obj)
        if marker is None:
            continue
        scope = marker.scope if isinstance(marker.scope, str) else getattr(marker.scope, "value", marker.scope)
        wrapped = obj._get_wrapped_function() if hasattr(obj, "_get_wrapped_function") else obj  # pytest >= 8.4
        doc = inspect.getdoc(wrapped) or ""
        rows.append([f"`{marker.name or attr}`", str(scope or "function"), doc])
    return [
        "# Fixtures", "",
        "Generated at build time from the fixtures pytest finds in `pytest_gpuenv.plugin`",
        "(`pytest --fixtures` shows the same).", "",
        *_table(["fixture", "scope", "what it gives"], rows), "",
        *hip_kernel_options_section(),
    ]


def hip_kernel_options() -> list[tuple[str, str, str]]:
    """(option, default, what it does) for each option of ``hip_kernel``: the table the fixture reads
    (``fixtures.kernel_options.OPTIONS``)."""
    from pytest_gpuenv.fixtures.kernel_options import OPTIONS

    return [(o.name, repr(o.default), o.doc) for o in OPTIONS]


def hip_kernel_options_section() -> list[str]:
    return [
        "## `hip_kernel` options", "",
        "`hip_kernel(path_or_source, name, **options)` compiles with `compile_kernel` (with `names=[...]`,",
        "`compile_module`), from `pytest_gpuenv.rtc`, and takes exactly these options; any other keyword is a",
        "`TypeError` naming it. The fixture sets the rest itself: the kernel folders, the cache, the device and",
        "the warp size of the test's `wave64`/`wave32` id. Generated from `pytest_gpuenv/fixtures/kernel_options.py`.",
        "",
        *_table(["option", "default", "what it does"], [[f"`{n}`", f"`{d}`", h] for n, d, h in hip_kernel_options()]), "",
    ]


def _help(argv: list[str]) -> str:
    from pytest_gpuenv import cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        cli.main([*argv, "--help"])
    return out.getvalue().rstrip()


def cli_page() -> list[str]:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        lines = ["# Command line", "", "Generated at build time from the argparse parsers of `gpuenv`",
                 "(`pytest_gpuenv/cli.py` and the commands it hands over to). Also `python -m pytest_gpuenv`.", ""]
        todo: list[list[str]] = [[]]
        while todo:
            argv = todo.pop(0)
            text = _help(argv)
            usage = re.search(r"\{([a-z,]+)\} \.\.\.", text)  # subcommands: `{info,doctor} ...`
            subs = usage.group(1).split(",") if usage and len(argv) < 3 else []
            todo += [[*argv, s] for s in subs]
            title = "gpuenv " + " ".join(argv) if argv else "gpuenv"
            lines += [f"## `{title}`", "", "```text", text, "```", ""]
        return lines
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


def _render(node: ast.AST | None) -> str:
    """A fix as text: f-string parts shown as ``{expression}``, joined strings joined."""
    if node is None:
        return ""
    if isinstance(node, ast.Constant):
        return "" if node.value is None else str(node.value)
    if isinstance(node, ast.JoinedStr):
        return "".join(_render(v) if isinstance(v, ast.Constant) else _slot(v.value)
                       for v in node.values if isinstance(v, (ast.Constant, ast.FormattedValue)))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _render(node.left) + _render(node.right)
    if isinstance(node, ast.IfExp):
        return f"{_render(node.body)} / {_render(node.orelse)}"
    return _slot(node)


def _slot(node: ast.AST) -> str:
    """What a fix fills in at run time: ``{user}``, ``{errors[0].fix}``; a computed text as ``{...}``."""
    return "{" + ast.unparse(node) + "}" if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)) else "{...}"


def _arg(call: ast.Call, index: int, keyword: str) -> ast.AST | None:
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    return call.args[index] if len(call.args) > index else None


def _assigned(func: ast.AST, name: str) -> list[ast.AST]:
    """The values assigned to ``name`` in ``func``, in source order (tuple unpacking included)."""
    out = []
    for node in ast.walk(func):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id == name:
                    out.append(node.value)
                elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    for t, v in zip(target.elts, node.value.elts):
                        if isinstance(t, ast.Name) and t.id == name:
                            out.append(v)
    return sorted(out, key=lambda n: (n.lineno, n.col_offset))


def problem_rows(root: Path) -> dict[str, dict[str, str]]:
    """code -> {fix, severity, category, where} for every ``Problem(...)``/``.add(...)`` under ``root``."""
    found: dict[str, dict[str, str]] = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for func in funcs:
            for call in ast.walk(func):
                if not isinstance(call, ast.Call):
                    continue
                fname = call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", "")
                if fname not in ("Problem", "add") or len(call.args) + len(call.keywords) < 2:
                    continue
                code = _arg(call, 0, "code")
                fix = _arg(call, 2, "fix")
                codes = [code] if isinstance(code, ast.Constant) else _assigned(func, code.id) \
                    if isinstance(code, ast.Name) else []
                fixes = _assigned(func, fix.id) if isinstance(fix, ast.Name) else [fix] * len(codes)
                if len(fixes) != len(codes):
                    fixes = [None] * len(codes)
                for c, f in zip(codes, fixes):
                    if not (isinstance(c, ast.Constant) and isinstance(c.value, str) and _CODE.match(c.value)):
                        continue
                    sev, cat = _arg(call, 3, "severity"), _arg(call, 4, "category")
                    rel = path.relative_to(root.parent).as_posix()
                    found.setdefault(c.value, {
                        "fix": _render(f) or "(none: a note)",
                        "severity": _render(sev) if sev is not None else "warning",
                        "category": _render(cat) if cat is not None else "environment",
                        "where": f"{rel}:{call.lineno}",
                    })
    return dict(sorted(found.items()))


def problems_page() -> list[str]:
    root = Path(importlib.import_module(PACKAGE).__file__).parent  # type: ignore[arg-type]
    rows = [[f"`{code}`", r["severity"], r["category"], r["fix"], f"`{r['where']}`"]
            for code, r in problem_rows(root).items()]
    return [
        "# Problem codes", "",
        "Generated at build time from every `Problem(...)` the package's source declares. `gpuenv doctor`",
        "prints each problem found with its fix; the pytest header names them, and a GPU test skipped",
        "because of one carries its code and fix. `{name}` in a fix is filled in at run time (a user, a",
        "group, a version), and `{...}` is a text computed for the machine (such as the `pip install` line",
        "for its torch build): `gpuenv doctor` prints it in full. Severity `error`: GPU tests cannot run because of it; `info`: a note, not a",
        "problem (`gpuenv doctor` exits 0).", "",
        *_table(["code", "severity", "category", "fix", "declared in"], rows), "",
    ]


def _describe(module: Any, name: str) -> tuple[str, str]:
    """(kind, first docstring paragraph) of ``module.name``; a marker as its ``pytest.mark`` line. A lazy
    name (the package's ``__getattr__``) is described as that gives it, not as a subpackage of that name."""
    from pytest_gpuenv.marks.dtypes import MARKER as DTYPES
    from pytest_gpuenv.marks.markers import MARKER_NAMES

    if name in MARKER_NAMES or name == DTYPES:
        return "marker", f"`pytest.mark.{name}`: see {{doc}}`markers`"
    getter = vars(module).get("__getattr__")
    obj = getter(name) if getter is not None and inspect.ismodule(getattr(module, name)) else getattr(module, name)
    if isinstance(obj, type):
        kind = "exception" if issubclass(obj, BaseException) else "class"
    elif inspect.ismodule(obj) or callable(obj):
        kind = "module" if inspect.ismodule(obj) else "function"
    else:
        return type(obj).__name__, f"`{obj!r}`"
    return kind, (inspect.getdoc(obj) or "").split("\n\n")[0]


def api_page() -> list[str]:
    lines = ["# Python API", "", "Generated at build time from the `__all__` of `pytest_gpuenv` and `pytest_gpuenv.rtc`:",
             "what a suite may import. Each row: the name, its kind and the first line of its docstring.", ""]
    for modname in (PACKAGE, f"{PACKAGE}.rtc"):
        module = importlib.import_module(modname)
        rows = []
        for name in module.__all__:
            rows.append([f"`{name}`", *_describe(module, name)])
        lines += [f"## `{modname}`", "", *_table(["name", "kind", "what it is"], rows), ""]
    return lines


PAGES = {"options": options_page, "markers": markers_page, "fixtures": fixtures_page,
         "cli": cli_page, "problems": problems_page, "python-api": api_page}


def write_pages(outdir: Path) -> list[Path]:
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, make in PAGES.items():
        path = outdir / f"{name}.md"
        text = "\n".join(["<!-- generated by docs/_ext/gpuenv_reference.py: do not edit -->", *make()]) + "\n"
        if not path.exists() or path.read_text(encoding="utf-8") != text:  # unchanged pages keep their mtime
            path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def _on_builder_inited(app: Any) -> None:
    write_pages(Path(app.srcdir) / "reference")


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", _on_builder_inited)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="write the generated reference pages")
    parser.add_argument("outdir", type=Path)
    for p in write_pages(parser.parse_args().outdir):
        print(p, file=sys.stdout)
