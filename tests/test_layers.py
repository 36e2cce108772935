"""The package's imports only point down, and no modules import each other in a circle.

Every module of ``slotflight/`` is parsed with :mod:`ast`; every import counts, at any
depth (inside functions, under ``TYPE_CHECKING``). Layers, bottom to top:

1. ``_errors``, ``_jsonable``, ``_written``, ``_cache``, ``_version`` (shared by all), and
   ``_advice`` on ``_errors`` (what the commands print on an error);
2. ``plan`` (the slot plan and instance walking);
3. ``syntax`` (frame syntaxes);
4. ``prompting`` and ``assemble`` (side by side: neither imports the other);
5. ``client`` (the SDK);
6. the shells: ``_serving``, ``testing``, ``local``, ``web``, ``bench``, ``cli``; a shell
   imports another only along :data:`SHELL_EDGES`;
7. the package itself (``slotflight/__init__.py``, the public surface), which nothing
   inside the package imports.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import slotflight

PACKAGE = Path(slotflight.__file__).parent
ROOT = "slotflight"

LAYERS: dict[str, int] = {
    "_errors": 0,
    "_jsonable": 0,
    "_written": 0,
    "_cache": 0,
    "_version": 0,
    "_advice": 1,  # the commands' error advice, over the error tree
    "plan": 1,
    "syntax": 2,
    "prompting": 3,
    "assemble": 3,
    "client": 4,
    "_serving": 5,
    "testing": 5,
    "local": 5,
    "web": 5,
    "bench": 5,
    "cli": 5,
    "": 6,  # slotflight/__init__.py
}

#: The shell-to-shell imports allowed (importer, imported): the shared server plumbing
#: under every server; the CLI starts every shell; the benchmark drives the embedded
#: server and measures the gateway's wire format.
SHELL_EDGES: frozenset[tuple[str, str]] = frozenset(
    {
        ("testing", "_serving"),
        ("local", "_serving"),
        ("web", "_serving"),
        ("cli", "_serving"),
        ("cli", "testing"),
        ("cli", "local"),
        ("cli", "web"),
        ("cli", "bench"),
        ("bench", "local"),
        ("bench", "web"),
    }
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _resolve(importer: str, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The ``slotflight`` modules ``node`` (in module ``importer``) imports."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name == ROOT or alias.name.startswith(ROOT + "."):
                yield _existing(alias.name)
        return
    if node.level:
        base = importer.split(".")
        if not _is_package(importer):
            base.pop()
        base = base[: len(base) - (node.level - 1)]
        target = ".".join([*base, node.module] if node.module else base)
    else:
        target = node.module or ""
    if target != ROOT and not target.startswith(ROOT + "."):
        return
    for alias in node.names:
        child = f"{target}.{alias.name}"
        yield child if child in MODULES else _existing(target)


def _existing(name: str) -> str:
    while name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def _imports() -> dict[str, set[tuple[str, int]]]:
    """Module → the ``slotflight`` modules it imports, with the line of each import."""
    graph: dict[str, set[tuple[str, int]]] = {}
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        graph[name] = {
            (target, node.lineno)
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for target in _resolve(name, node)
            if target != name
        }
    return graph


GRAPH = _imports()


def _layer_key(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_module_has_a_layer() -> None:
    assert {_layer_key(m) for m in MODULES} <= set(LAYERS), sorted(
        {_layer_key(m) for m in MODULES} - set(LAYERS)
    )
    assert len(MODULES) > 40  # the walk found the package


def test_the_import_reader_sees_relative_absolute_and_function_level_imports() -> None:
    assert "slotflight.plan.model" in {t for t, _ in GRAPH["slotflight.plan.tree"]}
    cli = {t for t, _ in GRAPH["slotflight.cli"]}
    assert "slotflight.plan.compiler" in cli  # imported inside a function
    assert "slotflight._errors" in cli  # at the top, relative


def test_imports_only_go_down() -> None:
    wrong = []
    for importer, targets in GRAPH.items():
        here = _layer_key(importer)
        for target, line in sorted(targets):
            there = _layer_key(target)
            if here == there:
                continue
            up = LAYERS[there] > LAYERS[here]
            sideways = LAYERS[there] == LAYERS[here] and (here, there) not in SHELL_EDGES
            if up or sideways:
                wrong.append(f"{MODULES[importer].relative_to(PACKAGE.parent)}:{line} -> {target}")
    assert not wrong, "imports that do not go down:\n" + "\n".join(wrong)


def test_no_import_cycle() -> None:
    """No strongly connected component of the import graph has two modules or more."""
    edges = {m: {t for t, _ in targets} for m, targets in GRAPH.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = 0
    for start in edges:
        if start in index:
            continue
        # iterative Tarjan: (node, iterator over its successors)
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = counter
                    counter += 1
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(edges[succ]))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        cycles.append(sorted(component))
    assert not cycles, f"import cycles: {cycles}"


def test_the_public_surface_is_imported_by_nothing_inside() -> None:
    importers = [m for m, targets in GRAPH.items() if any(t == ROOT for t, _ in targets)]
    assert not importers, importers
