"""The store contract as one class (``actorlog.testing.StoreContract``): a pytest suite."""

from __future__ import annotations

import pytest

from ..store import Store
from ._kit import StoreHarness
from ._kit_compact import CompactionContract
from ._kit_log import LogContract
from ._kit_more import SharingContract
from ._kit_timers import TimerContract

__all__ = ["StoreContract"]


class StoreContract(LogContract, SharingContract, CompactionContract, TimerContract):
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
