"""The package's import graph by layer, and the check CI runs on it.

Usage: ``python scripts/import_graph.py [--check] [PACKAGE_DIR]`` (default ``pytest_gpuenv``).

A *unit* is a folder of the package (``pytest_gpuenv/rtc``, ``pytest_gpuenv/runtime/cpu``); the modules at
the package root are the plugin layer. ``LAYERS`` below lists the units from the bottom up: a unit may import
from its own layer's units and those below, never from a layer above. Imports under ``if TYPE_CHECKING:``
count too (they are what makes two modules one concept or two). Printed: the modules per layer, every import
that runs up a layer, the cycles between units, and every import of another unit's underscore module (what
a unit shares is public in it, or lives in ``base``). ``--check`` exits 1 when any of the last three is
non-empty.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

# bottom up; units of one layer may import each other (one direction only: a cycle is reported)
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("base",)),
    ("runtime", ("runtime", "runtime.cpu")),
    ("detect", ("detect",)),
    ("rtc", ("rtc",)),
    ("perf", ("perf",)),
    ("marks", ("marks",)),
    ("session", ("session",)),
    ("guards", ("guards",)),
    ("dist", ("dist",)),
    ("fixtures", ("fixtures",)),
    ("plugin", ("",)),
]


class Import(NamedTuple):
    source: str  # importing module, dotted, without the package name
    target: str  # imported module, dotted, without the package name
    line: int


def modules(pkg: Path) -> dict[str, Path]:
    found = {}
    for path in sorted(pkg.rglob("*.py")):
        rel = path.relative_to(pkg).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        found[".".join(parts)] = path
    return found


def unit_of(module: str, mods: dict[str, Path]) -> str:
    """The folder a module lives in ('' for the root)."""
    path = mods[module]
    parts = module.split(".")
    return ".".join(parts if path.name == "__init__.py" else parts[:-1])


def imports(pkg: Path, mods: dict[str, Path]) -> list[Import]:
    name = pkg.name
    out = []
    for mod, path in mods.items():
        tree = ast.parse(path.read_bytes())
        base = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    anchor = base[: len(base) - node.level + 1]
                    full = ".".join([name, *anchor, *([node.module] if node.module else [])])
                else:
                    full = node.module or ""
                targets = [f"{full}.{a.name}" for a in node.names] + [full]
            for target in targets:
                if target != name and not target.startswith(name + "."):
                    continue
                rel = target[len(name) + 1 :]
                while rel and rel not in mods:
                    rel = rel.rpartition(".")[0]
                if rel and rel != mod:
                    out.append(Import(mod, rel, node.lineno))
                    break
    return sorted(set(out))


def layer_index(unit: str) -> int:
    for i, (_, units) in enumerate(LAYERS):
        if unit in units:
            return i
    raise SystemExit(f"unit {unit or '(root)'!r} is in no layer: add it to LAYERS in {__file__}")


def unit_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def private(module: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in module.split("."))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("package", nargs="?", default="pytest_gpuenv")
    ap.add_argument("--check", action="store_true", help="exit 1 on an upward import, a cycle or a private import")
    args = ap.parse_args(argv)
    pkg = Path(args.package)
    mods = modules(pkg)
    edges = imports(pkg, mods)
    units = {m: unit_of(m, mods) for m in mods}

    per_layer: dict[str, list[str]] = defaultdict(list)
    for m, u in units.items():
        per_layer[LAYERS[layer_index(u)][0]].append(m)
    print("modules per layer (bottom up):")
    for layer, members in LAYERS:
        folders = ", ".join(f"{u or '(root)'}" for u in members)
        print(f"  {layer:9} {len(per_layer[layer]):3}  [{folders}]")

    upward = [e for e in edges if layer_index(units[e.target]) > layer_index(units[e.source])]
    unit_edges: dict[str, set[str]] = defaultdict(set)
    for e in edges:
        if units[e.source] != units[e.target]:
            unit_edges[units[e.source]].add(units[e.target])
    cycles = unit_cycles(unit_edges)
    crossing = [
        e
        for e in edges
        if units[e.source] != units[e.target]
        and private(e.target[len(units[e.target]) :].lstrip("."))
    ]

    def show(title: str, rows: list[str]) -> None:
        print(f"{title}: {len(rows)}")
        for row in rows:
            print(f"  {row}")

    show("imports up a layer", [f"{e.source}:{e.line} -> {e.target}" for e in upward])
    show("cycles between units", [" <-> ".join(u or "(root)" for u in c) for c in cycles])
    show("imports of another unit's private module", [f"{e.source}:{e.line} -> {e.target}" for e in crossing])
    print(f"{len(mods)} modules, {len(unit_edges)} units importing others")
    return 1 if args.check and (upward or cycles or crossing) else 0


if __name__ == "__main__":
    sys.exit(main())
