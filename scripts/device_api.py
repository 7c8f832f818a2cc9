"""The HIP device API of ROCm's headers against what the CPU executor's headers provide.

    python scripts/device_api.py extract GITDIR REV LABEL [--math FILE --math-origin TEXT]
    python scripts/device_api.py table [--check]

``extract`` reads the device headers of ROCm's ``clr`` (``hipamd/include/hip/amd_detail/``, HEADERS below)
at commit REV of a git clone GITDIR, and the math API (``__clang_hip_math.h``, the header hipcc puts before
every HIP source), and records every device function and type they declare, and every
``__builtin_amdgcn_*`` they call, in
``pytest_gpuenv/runtime/cpu/device_api/rocm_names.toml``, with the commit: the extract is kept in the
repository, so that the table and its test run offline. Running it again with another REV adds that
release's names (a name in both keeps both labels).

The extract kept in the repository reads ROCm/clr at the rocm-6.3.3 tag and at amd-staging of 2025-02-22 (the
line ROCm 6.4 was branched from), with clang's math header: clr has since moved into ROCm/rocm-systems
(``projects/clr``); ``extract`` on a clone of it at a ROCm 7 commit adds that release's names.

``table`` writes ``docs/reference/device-api.md``: each name, provided by the executor (its headers in
``runtime/cpu/src/include`` declare it) or not, with the reason that ``device_api/not_provided.toml`` gives.
``--check`` writes nothing and exits 1 when the page is stale, a name is neither provided nor given a
reason, or a name given a reason is provided after all (tests/cpu/test_device_api.py runs the same check).

The extraction reads declarations, not every token: comments and preprocessor lines are dropped (the first
branch of each ``#if`` is read), then at namespace scope each statement is one of a type (``struct``,
``class``, ``union``, ``enum``, ``typedef``, ``using X =``), a function (the first name followed by ``(``
that is not an attribute) or neither; function-like ``#define`` macros count as functions. Names in a
namespace are qualified (``cooperative_groups::tiled_partition``); members of classes are not listed.
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import tomllib

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "pytest_gpuenv" / "runtime" / "cpu" / "device_api"
NAMES = DATA / "rocm_names.toml"
REASONS = DATA / "not_provided.toml"
EXECUTOR = ROOT / "pytest_gpuenv" / "runtime" / "cpu" / "src" / "include"
PAGE = ROOT / "docs" / "reference" / "device-api.md"

#: the headers of clr's hipamd/include/hip/amd_detail that hip/hip_runtime.h brings in for device code
HEADERS = (
    "amd_device_functions.h", "amd_warp_functions.h", "amd_warp_sync_functions.h", "amd_hip_atomic.h",
    "amd_hip_unsafe_atomics.h", "hip_ldg.h", "amd_math_functions.h", "amd_hip_fp16.h", "amd_hip_bf16.h",
    "amd_hip_vector_types.h", "amd_hip_complex.h", "amd_hip_cooperative_groups.h",
)
AMD_DETAIL = "hipamd/include/hip/amd_detail/"
MATH = "__clang_hip_math.h"
#: the table's section for the __builtin_amdgcn_* that the headers call (published code calls them too)
BUILTINS = "__builtin_amdgcn_* called by these headers"

#: names followed by ``(`` that are not what a statement declares
_NOT_NAMES = frozenset(["__attribute__", "__attribute", "__declspec", "alignas", "alignof", "decltype", "sizeof", "static_assert", "__launch_bounds__", "noexcept", "operator", "return", "if", "while", "for", "switch", "__has_builtin", "__builtin_expect", "defined", "template", "throw", "requires"])
_KEYWORDS = frozenset(["const", "constexpr", "volatile", "static", "inline", "extern", "unsigned", "signed", "int", "long", "short", "char", "bool", "float", "double", "void", "auto", "struct", "class", "union", "enum", "typename", "typedef", "using", "namespace", "public", "private", "protected", "friend", "virtual", "explicit", "mutable", "register", "thread_local", "new", "delete", "this", "true", "false", "nullptr"])
_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|[A-Za-z_]\w*|\d[\w.]*|::|->|.', re.S)
_DEFINE = re.compile(r"^\s*#\s*define\s+([A-Za-z_]\w*)\(", re.M)


class Name(NamedTuple):
    name: str
    kind: str  # "function" or "type"
    header: str


def _strip(text: str) -> str:
    """The source without comments and preprocessor lines, each conditional read in its first branch
    (the branches of one ``#if`` declare the same names, and reading one keeps the braces balanced)."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"\\\n", " ", text)
    kept, stack = [], []  # per open #if: whether the lines are in its first branch
    for line in text.split("\n"):
        d = re.match(r"\s*#\s*(\w+)", line)
        if d and d.group(1) in ("if", "ifdef", "ifndef"):
            stack.append(True)
        elif d and d.group(1) in ("else", "elif", "elifdef", "elifndef") and stack:
            stack[-1] = False
        elif d and d.group(1) == "endif" and stack:
            stack.pop()
        kept.append("" if d or not all(stack) else line)
    return "\n".join(kept)


def declared(text: str, header: str) -> list[Name]:
    """The functions and types a header declares at namespace scope (module docstring)."""
    found: dict[str, str] = {}
    for m in _DEFINE.finditer(re.sub(r"/\*.*?\*/", " ", text, flags=re.S)):
        found.setdefault(m.group(1), "function")
    toks = [t for t in _TOKEN.findall(_strip(text)) if not t.isspace()]
    scope: list[str] = []  # per open namespace or extern "C" block: its name ("" for extern / anonymous)
    stmt: list[str] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        if t == "{":
            if stmt and (stmt[0] == "namespace" or stmt[:2] in (["extern", '"C"'], ["extern", '"C++"'])):
                scope.append(stmt[1] if stmt[0] == "namespace" and len(stmt) > 1 else "")
                stmt = []
                i += 1
                continue
            if stmt[:1] != ["typedef"]:  # a typedef's name follows the body
                _record(stmt, scope, found)
            was_type = _is_type(stmt)
            depth, i = 1, i + 1  # skip the body
            while i < len(toks) and depth:
                depth += {"{": 1, "}": -1}.get(toks[i], 0)
                i += 1
            # a class body is followed by declarators and ';', a function body by nothing; after
            # `typedef struct {...} NAME;` the declarator is the type's name
            stmt = (["typedef", "__body__"] if stmt[:1] == ["typedef"] else ["__body__"]) if was_type else []
            continue
        if t == "}":
            if scope:
                scope.pop()
            stmt = []
        elif t == ";":
            if stmt and stmt[0] != "__body__" and stmt != ["typedef", "__body__"]:
                _record(stmt, scope, found)
            stmt = []
        else:
            stmt.append(t)
        i += 1
    return [Name(n, k, header) for n, k in sorted(found.items())]


def _is_type(stmt: list[str]) -> bool:
    return any(t in ("struct", "class", "union", "enum") for t in _skip_template(stmt)[:6])


def _skip_template(stmt: list[str]) -> list[str]:
    """The statement after any ``template <...>`` heads."""
    while stmt and stmt[0] == "template":
        depth, j = 0, 1
        for j in range(1, len(stmt)):
            depth += {"<": 1, ">": -1}.get(stmt[j], 0)
            if depth == 0:
                break
        stmt = stmt[j + 1:]
    return stmt


def _record(stmt: list[str], scope: list[str], found: dict[str, str]) -> None:
    stmt = _skip_template(stmt)
    if not stmt:
        return
    prefix = "".join(s + "::" for s in scope if s)

    def add(name: str, kind: str) -> None:
        if re.fullmatch(r"[A-Za-z_]\w*", name) and name not in _KEYWORDS:
            found.setdefault(prefix + name, kind)

    if stmt[:2] == ["__MAKE_VECTOR_TYPE__", "("] and len(stmt) > 2:  # amd_hip_vector_types.h: NAME1..NAME4
        for k in "1234":
            add(stmt[2] + k, "type")
        return
    if stmt[0].startswith("DECLOP_MAKE_") and stmt[0].endswith("_COMPONENT") and ")" in stmt:  # make_NAME
        add("make_" + stmt[stmt.index(")") - 1], "function")
        return
    if stmt[0] == "typedef":
        # typedef ... NAME;   typedef R (*NAME)(...);
        m = [t for t in stmt if re.fullmatch(r"[A-Za-z_]\w*", t)]
        if "(" in stmt and stmt[stmt.index("(") + 1:stmt.index("(") + 2] == ["*"]:
            add(stmt[stmt.index("(") + 2], "type")
        elif m:
            add(m[-1], "type")
        return
    if stmt[0] == "using" and len(stmt) > 2 and stmt[2] == "=":
        add(stmt[1], "type")
        return
    head = stmt[:6]
    for k in ("struct", "class", "union", "enum"):
        if k in head:
            j = stmt.index(k) + 1
            while j < len(stmt) and (stmt[j] in ("class", "struct") or stmt[j] in _NOT_NAMES):
                if stmt[j] in _NOT_NAMES and j + 1 < len(stmt) and stmt[j + 1] == "(":  # skip (...)
                    depth, j = 0, j + 1
                    while j < len(stmt):
                        depth += {"(": 1, ")": -1}.get(stmt[j], 0)
                        j += 1
                        if depth == 0:
                            break
                else:
                    j += 1
            if j < len(stmt) and stmt[j] not in ("{", ":"):
                # template specialisations (struct X<...>) name the primary template
                add(stmt[j], "type")
            return
    depth = 0
    for j, t in enumerate(stmt):
        if t == "=" and depth == 0:
            return  # a variable
        if t == "(":
            if j and re.fullmatch(r"[A-Za-z_]\w*", stmt[j - 1]) and stmt[j - 1] not in _NOT_NAMES and depth == 0 \
                    and stmt[j - 1] not in _KEYWORDS and (j < 2 or stmt[j - 2] != "operator"):
                add(stmt[j - 1], "function")
                return
            depth += 1
        elif t == ")":
            depth -= 1


def extract(gitdir: str, rev: str, label: str, math: str | None, math_origin: str | None) -> None:
    """Add the names of ROCm's headers at REV (and of the math header) to rocm_names.toml."""
    commit = subprocess.run(["git", "-C", gitdir, "rev-parse", rev + "^{commit}"], check=True, capture_output=True,
                            text=True).stdout.strip()
    data = _load_names()
    data["sources"][label] = f"ROCm/clr {commit}" + (f" ({rev})" if rev != commit else "")
    texts = {h: subprocess.run(["git", "-C", gitdir, "show", f"{commit}:{AMD_DETAIL}{h}"], check=True,
                               capture_output=True, text=True).stdout for h in HEADERS}
    if math:
        data["sources"][label + " math"] = math_origin or math
        texts[MATH] = Path(math).read_text(encoding="utf-8")
    called = data["names"].setdefault(BUILTINS, {})
    for text in texts.values():  # the clang builtins the headers are written with
        for name in sorted(set(re.findall(r"\b__builtin_amdgcn_\w+", _strip(text)))):
            entry = called.setdefault(name, {"kind": "builtin", "in": []})
            if label not in entry["in"]:
                entry["in"] = sorted([*entry["in"], label])
    for header, text in texts.items():
        names = data["names"].setdefault(header, {})
        for n in declared(text, header):
            entry = names.setdefault(n.name, {"kind": n.kind, "in": []})
            if label not in entry["in"]:
                entry["in"] = sorted([*entry["in"], label])
    _write_names(data)


def _load_names() -> dict:
    if not NAMES.exists():
        return {"sources": {}, "names": {}}
    return tomllib.loads(NAMES.read_text(encoding="utf-8"))


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _write_names(data: dict) -> None:
    out = ["# Generated by scripts/device_api.py extract: every device function and type that ROCm's headers",
           "# declare, with the releases (sources) each came from. Do not edit by hand.", "", "[sources]"]
    out += [f"{_q(k)} = {_q(v)}" for k, v in sorted(data["sources"].items())]
    for header, names in sorted(data["names"].items()):
        out += ["", f"[names.{_q(header)}]"]
        for name, e in sorted(names.items()):
            labels = ", ".join(_q(x) for x in e["in"])
            out.append(f'{_q(name)} = {{ kind = {_q(e["kind"])}, in = [{labels}] }}')
    DATA.mkdir(parents=True, exist_ok=True)
    NAMES.write_text("\n".join(out) + "\n", encoding="utf-8")


#: what a kernel includes to reach the whole device API of the executor
EXECUTOR_INCLUDES = ("hip/hip_runtime.h", "hip/hip_fp16.h", "hip/hip_bf16.h", "hip/hip_complex.h",
                     "hip/hip_cooperative_groups.h")


def provided(names: list[str], cxx: str = "g++") -> set[str]:
    """The names that a kernel compiled for the executor can use: each is a macro or found by a
    using-declaration (which takes functions, overload sets, templates and types alike), in one
    ``-fsyntax-only`` compile whose errors name the lines of the missing ones."""
    lines = [f"#include <{h}>" for h in EXECUTOR_INCLUDES]
    first = len(lines) + 1
    for i, name in enumerate(names):
        macro = name.rsplit("::", 1)[-1]
        qual = name if "::" in name else "::" + name
        lines.append(f"#if !defined({macro})\nnamespace gpuenv_probe_{i} {{ using {qual}; }}\n#endif")
    src = "\n".join(lines) + "\n"
    r = subprocess.run([cxx, "-std=c++17", "-fsyntax-only", "-fmax-errors=0", "-w", "-DGPUENV_WARP_SIZE=64",
                        "-I", str(EXECUTOR), "-x", "c++", "-"], input=src, capture_output=True, text=True)
    bad = {int(m) for m in re.findall(r"^<stdin>:(\d+):\d+: error:", r.stderr, re.M)}
    if r.returncode and not bad:
        raise RuntimeError(f"the probe did not compile:\n{r.stderr[-3000:]}")
    missing = {names[(line - first) // 3] for line in bad if line >= first}
    return set(names) - missing


class Row(NamedTuple):
    name: str
    kind: str
    header: str
    releases: str
    provided: bool
    reason: str  # why not provided; "" when provided


def rows(reasons_path: Path = REASONS) -> tuple[list[Row], list[str]]:
    """The table, and its problems: names neither provided nor given a reason, reasons for provided names."""
    data = _load_names()
    reasons = tomllib.loads(reasons_path.read_text(encoding="utf-8"))
    exact: dict[str, str] = reasons.get("names", {})
    globs: dict[str, str] = reasons.get("patterns", {})
    have = provided(sorted({name for names in data["names"].values() for name in names}))
    out: list[Row] = []
    problems: list[str] = []
    every = {name for names in data["names"].values() for name in names}
    for header, names in sorted(data["names"].items()):
        for name, e in sorted(names.items()):
            is_provided = name in have
            reason = exact.get(name) or next((r for g, r in globs.items() if fnmatch.fnmatchcase(name, g)), "")
            if is_provided and name in exact:
                problems.append(f"{name}: the executor provides it, but not_provided.toml gives a reason")
            if not is_provided and not reason:
                problems.append(f"{name} ({header}): neither provided nor given a reason in not_provided.toml")
            out.append(Row(name, e["kind"], header, ", ".join(e["in"]), is_provided, "" if is_provided else reason))
    for name in exact:
        if name not in every:
            problems.append(f"{name}: not_provided.toml names it, but no ROCm header declares it")
    return out, list(dict.fromkeys(problems))  # a name in two headers is one problem


def page() -> str:
    table, _ = rows()
    data = _load_names()
    n_prov = sum(r.provided for r in table)
    lines = [
        "# Device API", "",
        "Every device function and type that ROCm's device headers declare, and whether the CPU executor",
        "provides it. Generated by `python scripts/device_api.py table` from the names extracted from these",
        "sources (`pytest_gpuenv/runtime/cpu/device_api/rocm_names.toml`) and the reasons kept in",
        "`pytest_gpuenv/runtime/cpu/device_api/not_provided.toml`; `tests/cpu/test_device_api.py` fails when",
        "a name is neither provided nor given a reason. To add a release: `python scripts/device_api.py extract",
        "CLONE REV LABEL` with a git clone of ROCm's clr (hipamd/include/hip/amd_detail).", "",
    ]
    lines += [f"- {label}: {src}" for label, src in sorted(data["sources"].items())]
    lines += ["", f"{n_prov} of {len(table)} names provided.", ""]
    header = None
    for r in table:
        if r.header != header:
            header = r.header
            lines += ["", f"## `{header}`", "", "| name | kind | in | provided |", "|---|---|---|---|"]
        status = "yes" if r.provided else "no: " + r.reason
        lines.append(f"| `{r.name}` | {r.kind} | {r.releases} | {status.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("extract")
    ex.add_argument("gitdir")
    ex.add_argument("rev")
    ex.add_argument("label")
    ex.add_argument("--math")
    ex.add_argument("--math-origin")
    tb = sub.add_parser("table")
    tb.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    if a.cmd == "extract":
        extract(a.gitdir, a.rev, a.label, a.math, a.math_origin)
        return 0
    _, problems = rows()
    text = page()
    if a.check:
        if not PAGE.exists() or PAGE.read_text(encoding="utf-8") != text:
            problems.append(f"{PAGE.relative_to(ROOT)} is stale: run python scripts/device_api.py table")
        for p in problems:
            print(p)
        return 1 if problems else 0
    PAGE.write_text(text, encoding="utf-8")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
