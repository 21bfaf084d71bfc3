"""Group-commit metric of the SQL stores (on asyncio: PostgreSQL's driver is asyncio-only)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from actorlog import ActorSystem
from actorlog.stores import SqliteStore
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from .telemetry_agents import Ask, Researcher
from .test_metrics import _count, _sum

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_store_commit_appends_counts_shared_transactions(
    metric_reader: InMemoryMetricReader, tmp_path: Path
) -> None:
    """Concurrent actors' appends share SQLite transactions: the histogram records each
    transaction, with more than one append per transaction on average."""
    name = "actorlog.store.commit.appends"
    before_n, before_sum = _count(metric_reader, name), _sum(metric_reader, name)
    async with ActorSystem(SqliteStore(tmp_path / "m.db"), actors=[Researcher]) as system:
        refs = [await system.spawn(Researcher, f"a{i}") for i in range(20)]
        async with anyio.create_task_group() as tg:
            for ref in refs:
                tg.start_soon(ref.ask, Ask("q"))
    transactions = _count(metric_reader, name) - before_n
    appends = _sum(metric_reader, name) - before_sum
    assert transactions > 0
    assert appends > transactions
