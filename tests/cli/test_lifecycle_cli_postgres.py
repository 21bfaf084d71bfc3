"""``actorlog cancel | terminate | delete`` live on PostgreSQL: the actor is owned by a
runtime in another process, and the command reaches it through the store's inbox. Also a
remote ask to a finished actor owned elsewhere. Without a server these skip, except under
CI, where they fail (``tests/_pg.py``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import anyio
import pytest
from actorlog import ActorFinishedError, ActorSystem
from actorlog.stores import PostgresStore

from tests import _pg
from tests._owner import OwnerProcess

from ._lifecycle_agents import Job, Work
from ._support import Run, cli

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def pg() -> AsyncIterator[tuple[str, str]]:
    """(server URL, a fresh schema), dropped afterwards."""
    url = _pg.postgres_url("lifecycle CLI tests")
    schema = _pg.new_schema("actorlog_life")
    yield url, schema
    await _pg.drop_schemas(url, schema)


async def _cli(*args: str) -> Run:
    return await anyio.to_thread.run_sync(lambda: cli(*args))


Start = Callable[..., OwnerProcess]


def _worker(start: Start, mode: str, url: str, schema: str) -> OwnerProcess:
    return start("tests.cli.lifecycle_worker", mode, url, schema)


async def test_cancel_reaches_the_owner_in_another_process(
    pg: tuple[str, str], owner_processes: Start
) -> None:
    url, schema = pg
    w = _worker(owner_processes, "pg-own", url, schema)
    assert await w.next_line() == "in-tool"
    store_url = _pg.schema_url(url, schema)
    r = await _cli("cancel", store_url, "job-1", "--by", "ops", "--reason", "too slow")
    assert r.code == 0, r.err
    assert await w.next_line() == "outcome StepCancelledError"
    assert await w.next_line() == "after 2"  # the actor goes on
    items = (await _cli("history", store_url, "job-1", "--json")).json_lines()
    kinds = [i["kind"] for i in items if i["type"] == "event"]
    assert "cancel_requested" in kinds and "cancelled" in kinds
    steps = [i for i in items if i["type"] == "step"]
    assert steps[0]["error"]["type"] == "StepCancelledError"
    [call] = steps[0]["calls"]
    assert call["settled_by"] == "cancelled" and "in doubt" in call["error"]["message"]
    assert (await _cli("verify", store_url)).code == 0


async def test_terminate_reaches_the_owner_then_delete(
    pg: tuple[str, str], owner_processes: Start
) -> None:
    url, schema = pg
    w = _worker(owner_processes, "pg-own", url, schema)
    assert await w.next_line() == "in-tool"
    store_url = _pg.schema_url(url, schema)
    running = await _cli("delete", store_url, "job-1", "--force")
    assert running.code == 2 and "runs in runtime 'w1'" in running.err, running
    r = await _cli("terminate", store_url, "job-1", "--by", "ops", "--reason", "runaway")
    assert r.code == 0, r.err
    assert await w.next_line() == "outcome StepCancelledError"
    assert await w.next_line() == "after ActorFinishedError"
    [a] = (await _cli("actors", store_url, "--json")).json_lines()
    assert a["status"] == "terminated"
    assert "terminated by ops: runaway" in (await _cli("history", store_url, "job-1")).out
    assert (await _cli("verify", store_url)).code == 0
    d = await _cli("delete", store_url, "job-1", "--yes", "--reason", "cleanup")
    assert d.code == 0, d.err
    [gone] = (await _cli("actors", store_url, "--deleted", "--json")).json_lines()
    assert gone["ended"] == "terminated" and gone["reason"] == "cleanup"
    assert (await _cli("actors", store_url, "--json")).json_lines() == []


async def test_remote_ask_to_a_finished_actor_owned_elsewhere(
    pg: tuple[str, str], owner_processes: Start
) -> None:
    url, schema = pg
    w = _worker(owner_processes, "pg-finished", url, schema)
    assert await w.next_line() == "finished"
    store = PostgresStore(url, schema=schema)
    async with ActorSystem(store, actors=[Job], owner="other", lease_ttl=5) as system:
        ref = system.ref(Job, "fin-1")
        with anyio.fail_after(60), pytest.raises(ActorFinishedError, match="bye"):
            await ref.ask(Work("late"), timeout=30)
        assert system.status("fin-1") == "unknown"  # it stayed with its owner
    [a] = (await _cli("actors", _pg.schema_url(url, schema), "--json")).json_lines()
    assert a["status"] == "finished"
