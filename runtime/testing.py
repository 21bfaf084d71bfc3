"""The store contract kit: the tests every :class:`~actorlog.store.Store` must pass.

Like Akka's journal TCK (``JournalSpec``): a store written by a third party runs the same
suite as actorlog's own stores. This module imports only public actorlog modules
(``actorlog.store``; ``actorlog.stores`` only for the default :meth:`StoreHarness.open_url`)
and needs pytest and anyio's pytest plugin (which comes with anyio), nothing else.

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

The module also holds the frames of ``docs/FORMAT.md`` written from the spec, independently
of the runtime's codec: :func:`entry_checksum` ([F6]) and :func:`snapshot_digest` ([F12]), so
that the rows the kit appends are valid entries a runtime could read back.
"""

from __future__ import annotations

import pytest

from ._kit import StoreHarness, entry_checksum, make_entry, needs, snapshot_digest
from ._kit_log import LogContract
from ._kit_more import SharingContract
from ._kit_timers import TimerContract
from .store import Store

__all__ = [
    "StoreContract",
    "StoreHarness",
    "entry_checksum",
    "make_entry",
    "needs",
    "snapshot_digest",
]


class StoreContract(LogContract, SharingContract, TimerContract):
    """The contract tests. Subclass it as ``Test<YourStore>`` and give it a ``harness``
    fixture yielding a :class:`StoreHarness` (and closing it afterwards).

    Every test runs on anyio's ``asyncio`` backend; override the ``anyio_backend`` fixture
    for a store that runs elsewhere too. The contract itself is written down in
    :mod:`actorlog.store`.
    """

    pytestmark = pytest.mark.anyio

    @pytest.fixture
    def anyio_backend(self) -> str:
        return "asyncio"

    @pytest.fixture
    async def store(self, harness: StoreHarness) -> Store:
        """An opened store of the harness."""
        return await harness.open()


for _obj in (StoreHarness, entry_checksum, make_entry, needs, snapshot_digest):
    _obj.__module__ = __name__  # documented and shown as actorlog.testing.X
