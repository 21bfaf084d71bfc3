"""The CLI, the operator API and the HTML timeline show the same status word as the event
that set it (issue 15): an actor the runtime quarantined is ``quarantined``, not ``failed``."""

from __future__ import annotations

from pathlib import Path

import anyio
import attrs
import pytest
from actorlog import Actor, ActorQuarantinedError, ActorSystem, Context, ops, tool
from actorlog.stores import SqliteStore

from ._support import cli

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@attrs.define
class Go:
    q: str


@attrs.define
class Empty:
    pass


@tool(effect="read")
async def first(q: str) -> str:
    return q


@tool(effect="read")
async def second(q: str) -> str:
    return q


class Before(Actor[Empty]):
    __actorlog_tag__ = "status-words.agent"
    snapshot_every = None

    async def receive(self, ctx: Context, msg: Go) -> str:
        return await ctx.call(first, msg.q)


class After(Actor[Empty]):
    """The same actor after a code change that calls another tool: replay diverges."""

    __actorlog_tag__ = "status-words.agent"
    snapshot_every = None

    async def receive(self, ctx: Context, msg: Go) -> str:
        return await ctx.call(second, msg.q)


async def _quarantined_store(tmp_path: Path) -> Path:
    path = tmp_path / "agents.db"
    async with ActorSystem(SqliteStore(path), actors=[Before]) as system:
        await (await system.spawn(Before, "a")).ask(Go("x"))
    async with ActorSystem(SqliteStore(path), actors=[After], recover_on_start=False) as system:
        with anyio.fail_after(10), pytest.raises(ActorQuarantinedError):
            await system.spawn(After, "a")
        assert system.status("a") == "quarantined"
    return path


async def test_a_quarantined_actor_has_the_events_word_everywhere(tmp_path: Path) -> None:
    path = await _quarantined_store(tmp_path)
    async with ops.opened(f"sqlite:///{path}") as store:
        status = await ops.actor_status(store, "a")
        h = await ops.history(store, "a")
    assert [e.kind for e in h.events if e.kind in ("quarantined", "stopped")] == ["quarantined"]
    assert status.status == "quarantined"
    assert status.problem is not None and "NonDeterminismError" in status.problem

    table = cli("actors", f"sqlite:///{path}")
    (line,) = [ln for ln in table.out.splitlines() if ln.startswith("a ")]
    assert "quarantined" in line and "failed" not in line
    assert '"status":"quarantined"' in cli("actors", f"sqlite:///{path}", "--json").out

    page = tmp_path / "a.html"
    run = cli("history", f"sqlite:///{path}", "a", "--html", str(page))
    assert run.code == 0, run.err
    html = page.read_text()
    assert 'class="badge b-quarantined"' in html and 'badge b-failed"' not in html
