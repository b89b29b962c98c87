#!/usr/bin/env python3
"""Fails when the crate's module graph has a cycle, or the graph of its top-level folders.

Nodes are the modules of `rust/src` (one per file; `foo/mod.rs` is `foo`); an edge `a -> b` is a
`crate::b...` path used in `a` outside its `#[cfg(test)]` module (tests may use anything). A
submodule's own `super::` references to its parent are not edges: a parent exporting from its
children is not a cycle. The same check runs on the top-level modules (`guide`, `build`, ...),
which keeps the layers of `lib.rs` one-way. Exit 1, printing each strongly connected component of
more than one module, when there is one.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "rust" / "src"


def module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] in ("mod", "lib"):
        parts.pop()
    return "::".join(parts) or "crate"


def without_tests(text: str) -> str:
    """The text before a top-level `#[cfg(test)]` module (the crate's convention: tests last)."""
    match = re.search(r"^#\[cfg\(test\)\]\s*\n\s*mod \w+", text, re.M)
    return text if match is None else text[: match.start()]


def strip_comments(text: str) -> str:
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


def main() -> int:
    files = sorted(ROOT.rglob("*.rs"))
    modules = {module_of(f) for f in files}
    test_files = {f for f in files if f.name == "tests.rs"}
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for f in files:
        if f in test_files:
            continue
        source = module_of(f)
        text = strip_comments(without_tests(f.read_text()))
        # `use crate::a::{b, c::d}` and inline `crate::a::b::c` paths: the longest module prefix.
        for path in re.findall(r"crate((?:::\w+)+)", text):
            parts = path.strip(":").split("::")
            for k in range(len(parts), 0, -1):
                target = "::".join(parts[:k])
                if target in modules:
                    if target != source and not source.startswith(target + "::"):
                        edges[source].add(target)
                    break
    layers: dict[str, set[str]] = {}
    for a, targets in edges.items():
        layers.setdefault(a.split("::")[0], set()).update(
            b.split("::")[0] for b in targets if b.split("::")[0] != a.split("::")[0]
        )
    cycles = report("module", edges) + report("layer", layers)
    print(f"{len(modules)} modules, {sum(map(len, edges.values()))} edges, {len(layers)} layers, {cycles} cycles")
    return 1 if cycles else 0


def report(kind: str, edges: dict[str, set[str]]) -> int:
    cycles = [c for c in strongly_connected(edges) if len(c) > 1]
    for c in cycles:
        print(f"{kind} cycle: " + ", ".join(sorted(c)))
        for a in sorted(c):
            print(f"  {a} -> " + ", ".join(sorted(b for b in edges[a] if b in c)))
    return len(cycles)


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                out.append(component)
    return out


if __name__ == "__main__":
    sys.exit(main())
