"""Stores and the store kit use only the public plugin API: ``stores/`` imports nothing of
actorlog but ``actorlog.store`` (and its own modules), and the kit (``actorlog.testing`` and
the ``_kit*`` modules behind it) nothing but ``actorlog.store``, so a third party can write and
check a store with exactly what actorlog publishes (STYLE.md, the module map)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STORES = sorted((ROOT / "stores").rglob("*.py"))
# the kit; the replay tester beside it (_replay.py) replays through the runtime
KIT = [p for p in sorted((ROOT / "runtime" / "testing").glob("*.py")) if p.name != "_replay.py"]


def _actorlog_imports(path: Path, package: str) -> set[str]:
    """The actorlog modules ``path`` imports (relative imports resolved against
    ``package``), under TYPE_CHECKING too."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "actorlog"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            if module.split(".")[0] == "actorlog":
                found.add(module)
    return found


def _package(path: Path) -> str:
    if path.is_relative_to(ROOT / "stores"):
        parts = path.relative_to(ROOT / "stores").with_suffix("").parts
        return ".".join(["actorlog", "stores", *parts[:-1]])
    return "actorlog"


@pytest.mark.parametrize("path", STORES, ids=lambda p: str(p.relative_to(ROOT)))
def test_stores_import_only_the_store_module(path: Path) -> None:
    bad = {
        m
        for m in _actorlog_imports(path, _package(path))
        if m != "actorlog.store" and not m.startswith("actorlog.stores")
    }
    assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


@pytest.mark.parametrize("path", KIT, ids=lambda p: p.name)
def test_the_store_kit_imports_only_public_modules(path: Path) -> None:
    bad = {
        m
        for m in _actorlog_imports(path, "actorlog.testing")
        if m not in ("actorlog.store", "actorlog.stores")
        and not m.startswith("actorlog.testing._kit")
        # actorlog.testing also holds the replay tester (not the store kit), which replays
        # through the runtime's own recovery path
        and not (path.name == "__init__.py" and m == "actorlog.testing._replay")
    }
    assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"
