"""The public surface: __all__ matches the namespace, and names show as actorlog.X."""

from __future__ import annotations

import actorlog
import actorlog.stores


def test_all_lists_exactly_the_public_names() -> None:
    for name in actorlog.__all__:
        assert getattr(actorlog, name) is not None, name
    public = {n for n in dir(actorlog) if not n.startswith("_")} - {
        "annotations",
        "store",
        "stores",
    }
    public -= {"ops", "inspect", "testing"}  # public submodules: the operator API (and its
    # old name), the store kit
    public -= {"integrations", "web"}  # optional extras (pydantic_ai, the console)
    assert public <= set(actorlog.__all__), public - set(actorlog.__all__)


def test_inspect_is_the_old_name_of_ops() -> None:
    """``actorlog.inspect`` keeps working: it re-exports every public name of ``actorlog.ops``."""
    import actorlog.inspect
    import actorlog.ops

    assert actorlog.inspect.__all__ == actorlog.ops.__all__
    for name in actorlog.ops.__all__:
        assert getattr(actorlog.inspect, name) is getattr(actorlog.ops, name), name


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
