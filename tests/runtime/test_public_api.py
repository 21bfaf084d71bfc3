"""The public surface: __all__ matches the namespace, and names show as actorlog.X."""

from __future__ import annotations

import sys

import actorlog
import actorlog.stores
import pytest


def test_all_lists_exactly_the_public_names() -> None:
    for name in actorlog.__all__:
        assert getattr(actorlog, name) is not None, name
    public = {n for n in dir(actorlog) if not n.startswith("_")} - {
        "annotations",
        "store",
        "stores",
    }
    public -= {"ops", "inspect", "testing", "cli"}  # public submodules: the operator API (and
    # its old name), the store kit, the ``actorlog`` command (an attribute once imported)
    public -= {"integrations", "web"}  # optional extras (pydantic_ai, the console)
    public -= {"errors"}  # the exceptions' own module (their names are importable here too)
    listed = set(actorlog.__all__) | set(actorlog.errors.__all__)
    assert public <= listed, public - listed


def test_the_exceptions_live_in_actorlog_errors_and_import_from_actorlog() -> None:
    import actorlog.errors

    assert "InDoubtError" in actorlog.errors.__all__
    assert not set(actorlog.errors.__all__) & set(actorlog.__all__)
    for name in actorlog.errors.__all__:
        assert getattr(actorlog, name) is getattr(actorlog.errors, name), name
    from actorlog import CorruptEntryError, InDoubtError  # still importable from the package

    assert issubclass(InDoubtError, actorlog.ActorlogError)
    assert CorruptEntryError.__module__ == "actorlog"


def test_help_of_the_package_is_a_page_not_a_book() -> None:
    """``help(actorlog)`` shows the quick start and the main classes; the exceptions' long
    inherited-method listings are on ``help(actorlog.errors)``."""
    import pydoc

    import actorlog.errors

    page = pydoc.plain(pydoc.render_doc(actorlog))
    assert "Start here" in page and "class ActorSystem" in page
    assert "class InDoubtError" not in page
    # a page (it was 3,034 lines with the exceptions on it): about 1,200 lines on Python
    # 3.11, 1,400 on 3.12 and 1,650 on 3.13, whose pydoc also lists inherited members of the
    # mixins and every attrs class's generated dunders (AskStream and StepEvent came in #26)
    limit = 1600 if sys.version_info < (3, 13) else 1800
    assert len(page.splitlines()) < limit, len(page.splitlines())
    errors_page = pydoc.plain(pydoc.render_doc(actorlog.errors))
    assert "class InDoubtError" in errors_page


def test_there_is_no_inspect_alias_shadowing_the_stdlib() -> None:
    """``actorlog.inspect``, the pre-release name of ``actorlog.ops``, is gone: it shadowed the
    standard library's ``inspect`` inside the package."""
    import importlib

    import actorlog.ops

    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("actorlog.inspect")
    assert not hasattr(actorlog, "inspect")
    assert actorlog.ops.__all__


def test_public_classes_show_the_package_module() -> None:
    assert actorlog.ActorSystem.__module__ == "actorlog"
    assert actorlog.CorruptEntryError.__module__ == "actorlog"


def test_stores_all() -> None:
    assert set(actorlog.stores.__all__) == {
        "MemoryStore",
        "PostgresStore",
        "SqliteStore",
        "open_store",
    }
    assert actorlog.SqliteStore is actorlog.stores.SqliteStore
