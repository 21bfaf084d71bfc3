"""The store contract kit: the tests every :class:`~actorlog.store.Store` must pass.

Like Akka's journal TCK (``JournalSpec``): a store written by a third party runs the same
suite as actorlog's own stores. This module imports only public actorlog modules
(``actorlog.store``; ``actorlog.stores`` only for the default :meth:`StoreHarness.open_url`)
and needs pytest (``pip install 'actorlog[testing]'``) and anyio's pytest plugin (which
comes with anyio), nothing else. Only the kit needs pytest: ``import actorlog.testing`` and
:func:`replay` work without it (the kit's names are imported on first use).

Use (``docs/stores.md`` has the whole walk-through)::

    import pytest
    from actorlog.testing import StoreContract, StoreHarness

    class MyHarness(StoreHarness):
        def new(self, *, read_only=False):
            return MyStore(self.path, read_only=read_only)

    class TestMyStore(StoreContract):
        @pytest.fixture
        async def harness(self, tmp_path):
            h = MyHarness()
            yield h
            await h.aclose()

Each test asks for ``harness`` (a :class:`StoreHarness`) or ``store`` (an opened store of the
harness). A test that needs something the harness cannot do (a damaging write, a shared
database, ...) skips with the reason; tests that need a capability flag the store does not
claim (``StoreCapabilities``) skip too.

It also holds the replay tester, :func:`replay` (docs/upgrading.md): recorded histories
replayed against the current code with no tool running, every divergence reported.

The module also holds the frames of ``docs/FORMAT.md`` written from the spec, independently
of the runtime's codec: :func:`entry_checksum` ([F6]), :func:`snapshot_digest` ([F12]) and
:func:`log_start_checksum` ([F16]), so
that the rows the kit appends are valid entries a runtime could read back.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._replay import Divergence, ReplayReport, replay

if TYPE_CHECKING:
    from ._kit import StoreHarness, entry_checksum, make_entry, needs, snapshot_digest
    from ._kit_compact import log_start_checksum
    from ._kit_contract import StoreContract

__all__ = [
    "Divergence",
    "ReplayReport",
    "StoreContract",
    "StoreHarness",
    "entry_checksum",
    "log_start_checksum",
    "make_entry",
    "needs",
    "replay",
    "snapshot_digest",
]

#: the store contract kit's names, imported on first use (the kit is a pytest suite)
_KIT = {
    "StoreContract": "._kit_contract",
    "StoreHarness": "._kit",
    "entry_checksum": "._kit",
    "make_entry": "._kit",
    "needs": "._kit",
    "snapshot_digest": "._kit",
    "log_start_checksum": "._kit_compact",
}


def __getattr__(name: str) -> Any:
    where = _KIT.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        import pytest  # noqa: F401  (the kit is a pytest suite)
    except ImportError as exc:
        raise ImportError(
            f"actorlog.testing.{name} is part of the store contract kit, a pytest suite: "
            "pip install 'actorlog[testing]' (or pytest)"
        ) from exc
    obj = getattr(importlib.import_module(where, __package__), name)
    obj.__module__ = __name__  # documented and shown as actorlog.testing.X
    globals()[name] = obj
    return obj


for _obj in (Divergence, ReplayReport, replay):
    _obj.__module__ = __name__
