"""Torture-suite settings: seeds, soak scaling, and the asyncio backend.

* ``ACTORLOG_TORTURE_SEED=N`` replays a failing run (every failure message prints its seed);
  without it each session draws a fresh base seed, shown in the report header.
* ``ACTORLOG_SOAK=1`` multiplies every iteration count by 10 (a long soak);
  ``ACTORLOG_SOAK_ITERATIONS=N`` sets the multiplier to N instead (tests/_soak.py).
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from pathlib import Path

import pytest
from actorlog.store import Store
from actorlog.stores import MemoryStore, SqliteStore

from tests._soak import (
    base_seed,
    soak_factor as soak_factor,  # re-exported
)

#: the base seed of this session (tests derive theirs from it; the same in every xdist worker)
BASE_SEED = base_seed()


def soak(n: int) -> int:
    """An iteration count: ``n`` in CI, scaled for a soak."""
    return n * soak_factor()


#: What this session tried, summed over the torture tests (printed at the end by
#: tests/conftest.py, which adds up the xdist workers' figures).
FIGURES: collections.Counter[str] = collections.Counter()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A soak runs each test ``soak_factor()`` times longer: so may its timeout."""
    if soak_factor() > 1:
        for item in items:
            item.add_marker(pytest.mark.timeout(240 * soak_factor()))


@pytest.fixture
def anyio_backend() -> str:
    """In-process torture tests run on asyncio; the trio cases choose their backend themselves
    (``sqlite-trio`` kinds, a ``backend`` parameter)."""
    return "asyncio"


@pytest.fixture
def seed(request: pytest.FixtureRequest) -> int:
    """A per-test seed derived from the session's base seed and the test's name (the same
    for every parametrization of one test, so they share one reference run)."""
    name = getattr(request.node, "originalname", None) or request.node.name
    return (BASE_SEED * 1_000_003 + sum(i * ord(c) for i, c in enumerate(name))) % 10**9


StoreFactory = Callable[[], Store]


@pytest.fixture(params=["memory", "sqlite"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    """A factory for a store over the same data on every call (the same MemoryStore object,
    or a fresh SqliteStore on one file), so a test can restart the system over it."""
    if request.param == "memory":
        mem = MemoryStore()
        return lambda: mem
    path = tmp_path / "agents.db"
    return lambda: SqliteStore(path)
