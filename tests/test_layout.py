"""The module layout of ``runtime/`` and ``stores/`` (docs/architecture.md; issues 13 and 27).

Built from the sources with ``ast``: every import counts, also under ``TYPE_CHECKING`` and
inside functions, because a circle hidden there is still a circle for the reader. Each
allow-list below records what is left today; it may only shrink. A listed item that is gone
fails the test too, so that the list is shrunk with the change that fixed it.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"actorlog": ROOT / "runtime", "actorlog.stores": ROOT / "stores"}

#: The import circles allowed: none since the core re-layout (issue 13). A lower module
#: talks upward only through a Protocol it defines (``CellHost``, ``StepHost``,
#: ``Recovering``, ``OwnershipHost``, ``Messenger``, ``Passivatable``).
KNOWN_CYCLES: list[set[str]] = []

#: Imports of the runtime's private modules from ``stores/`` allowed (none: stores import
#: only the public ``actorlog.store``); each pair is (store module, imported module).
KNOWN_PRIVATE_IMPORTS_FROM_STORES: set[tuple[str, str]] = set()

#: The private packages, bottom up (issue 27; docs/architecture.md draws them). A module of one
#: may import its own package and those below it, never one above. The journal layer is the
#: ground floor: ``_journal`` with its public faces ``actorlog.store`` (the store plugin API)
#: and ``actorlog.errors``.
LAYERS: list[tuple[str, ...]] = [
    ("actorlog._journal", "actorlog.store", "actorlog.errors"),
    ("actorlog._tracing",),
    ("actorlog._durability",),
    ("actorlog._effects",),
    ("actorlog._core",),
    ("actorlog._cluster",),
    ("actorlog._runtime",),
]
#: The public surface on top (with ``actorlog.stores``): the private packages import none of
#: it, except where listed in KNOWN_UPWARD.
PUBLIC_TOP = (
    "actorlog",
    "actorlog.ops",
    "actorlog.web",
    "actorlog.cli",
    "actorlog.testing",
    "actorlog.integrations",
    "actorlog.inspect",
)
#: The actor core's internals: the operators' code (``ops``, ``web``, ``cli``, ``_views``) uses
#: the public API, ``ops``, the journal layer, ``_tracing`` and ``_durability``, never these.
CORE_INTERNALS = ("actorlog._effects", "actorlog._core", "actorlog._cluster", "actorlog._runtime")
OPERATORS = ("actorlog.ops", "actorlog.web", "actorlog.cli", "actorlog._views")

#: Imports that break a layer rule today, each with its reason; (importer, imported module).
#: The list may only shrink, like the others: empty since the read-only replay host moved into
#: ``_core``, recovery's plan into ``_durability`` and ``Lease`` into ``_journal``.
KNOWN_UPWARD: dict[tuple[str, str], str] = {}
KNOWN_OPERATOR_IMPORTS: dict[tuple[str, str], str] = {}

#: The one place a private package names the concrete stores, and why it is a rule, not an
#: exception: ``ActorSystem(store="sqlite:///...")`` opens the URL with
#: ``actorlog.stores.open_store``, imported when a URL is given. ``actorlog.stores`` imports only
#: the journal layer (``test_stores_import_only_the_store_api``), so this import points down the
#: dependency graph, never round it; everywhere else the private packages know a store only
#: through the ``Store`` protocol; (importer, imported module).
STORE_URL_OPENERS: set[tuple[str, str]] = {("actorlog._runtime.options", "actorlog.stores")}

#: A folder holds about 15 modules at most (issue 27): more is two concepts.
MAX_FOLDER_MODULES = 15

#: No module needs banners: ~600 lines at most (issue 13). A module that grows past this is
#: two modules.
MAX_LINES = 620
#: Modules allowed over MAX_LINES, with their limit: none since the core re-layout.
KNOWN_LONG_MODULES: dict[str, int] = {}


def _modules() -> dict[str, Path]:
    """Every module of the two packages, by dotted name."""
    found: dict[str, Path] = {}
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package, *parts))] = path
    return found


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """``name`` if it is one of ours, else its longest prefix that is (or None)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of ours that ``module`` imports anywhere in its source."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from . import ops`` imports the module actorlog.ops; ``from .x import y``, .x
            names = [f"{base}.{alias.name}" for alias in node.names]
            targets = [name if name in modules else base for name in names]
        for target in targets:
            found = _known(target, modules)
            if found is not None and found != module:
                out.add(found)
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_imports_under_type_checking_and_in_functions() -> None:
    graph = _graph()
    assert "actorlog._effects.ref" in graph["actorlog._effects.stephost"]  # under TYPE_CHECKING
    assert "actorlog.stores" in graph["actorlog.ops.reads"]  # inside opened()
    assert "actorlog.ops" in graph["actorlog.cli._main"]  # ``from .. import ops``


def _in(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _layer(module: str) -> int | None:
    for rank, packages in enumerate(LAYERS):
        if _in(module, packages):
            return rank
    return None


def _broken(found: set[tuple[str, str]], known: dict[tuple[str, str], str], what: str) -> None:
    assert found <= set(known), f"{what}; new: {sorted(found - set(known))}"
    gone = sorted(set(known) - found)
    assert not gone, f"fixed, remove from the known list: {gone}"


def test_private_packages_import_only_their_own_layer_and_below() -> None:
    """The journal imports nothing above it; each private package only those below it, and
    the concrete stores only where a store URL is opened (STORE_URL_OPENERS)."""
    graph = _graph()
    openers = {pair for pair in STORE_URL_OPENERS if pair[1] in graph[pair[0]]}
    assert openers == STORE_URL_OPENERS, f"opens no store URL now: {STORE_URL_OPENERS - openers}"
    found: set[tuple[str, str]] = set()
    for module, imports in graph.items():
        rank = _layer(module)
        if rank is None:
            continue
        for imported in imports:
            other = _layer(imported)
            if _in(imported, ("actorlog.stores",)):
                if (module, imported) not in openers:
                    found.add((module, imported))  # a concrete store, where no URL is opened
            elif other is None and _in(imported, PUBLIC_TOP):
                found.add((module, imported))  # up into the public surface
            elif other is not None and other > rank:
                found.add((module, imported))
    _broken(found, KNOWN_UPWARD, "a private package imports one above it (docs/architecture.md)")


def test_stores_import_only_the_store_api() -> None:
    graph = _graph()
    found = {
        (module, imported)
        for module, imports in graph.items()
        if _in(module, ("actorlog.stores",))
        for imported in imports
        if not _in(imported, ("actorlog.stores", "actorlog.store", "actorlog.errors"))
    }
    assert not found, f"stores import only actorlog.store and actorlog.errors: {sorted(found)}"


def test_operators_never_import_the_actor_core() -> None:
    """``ops``, ``web``, ``cli`` and ``_views`` use the public API and ``ops``."""
    graph = _graph()
    found = {
        (module, imported)
        for module, imports in graph.items()
        if _in(module, OPERATORS)
        for imported in imports
        if _in(imported, CORE_INTERNALS)
    }
    _broken(found, KNOWN_OPERATOR_IMPORTS, "operator code imports the actor core's internals")


def test_every_package_says_what_lives_there_and_no_folder_is_crowded() -> None:
    for folder in (*PACKAGES.values(), ROOT / "stores" / "postgres"):
        for init in sorted(folder.rglob("__init__.py")):
            doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
            assert doc, f"{init.relative_to(ROOT)}: a package says what lives there and may import"
            modules = [p for p in init.parent.glob("*.py") if p.name != "__init__.py"]
            assert len(modules) <= MAX_FOLDER_MODULES, (
                f"{init.parent.relative_to(ROOT)} holds {len(modules)} modules: split it by concept"
            )


def test_no_import_cycles_but_the_known_ones() -> None:
    found = sorted(sorted(c) for c in _cycles(_graph()))
    known = sorted(sorted(c) for c in KNOWN_CYCLES)
    assert found == known, (
        "import cycles changed. A new cycle: remove it (a lower module talks upward only "
        "through a Protocol it defines). A known cycle shrank or is gone: update "
        f"KNOWN_CYCLES.\nfound: {found}\nknown: {known}"
    )


def test_stores_import_no_private_runtime_module() -> None:
    graph = _graph()
    private = {
        (module, imported)
        for module, imports in graph.items()
        if module.startswith("actorlog.stores")
        for imported in imports
        if imported.rpartition(".")[2].startswith("_")
        and not imported.startswith("actorlog.stores")
    }
    assert private <= KNOWN_PRIVATE_IMPORTS_FROM_STORES, (
        "stores import only actorlog.store; new private imports: "
        f"{sorted(private - KNOWN_PRIVATE_IMPORTS_FROM_STORES)}"
    )
    assert private == KNOWN_PRIVATE_IMPORTS_FROM_STORES, (
        "gone, remove from KNOWN_PRIVATE_IMPORTS_FROM_STORES: "
        f"{sorted(KNOWN_PRIVATE_IMPORTS_FROM_STORES - private)}"
    )


def test_no_module_is_longer_than_the_limit() -> None:
    lines = {
        name: len(path.read_text(encoding="utf-8").splitlines())
        for name, path in _modules().items()
    }
    too_long = {name: n for name, n in lines.items() if n > KNOWN_LONG_MODULES.get(name, MAX_LINES)}
    assert not too_long, f"over {MAX_LINES} lines (or over their listed limit): {too_long}"
    fixed = sorted(name for name in KNOWN_LONG_MODULES if lines.get(name, 0) <= MAX_LINES)
    assert not fixed, f"now {MAX_LINES} lines or fewer, remove from KNOWN_LONG_MODULES: {fixed}"
