"""A write the handler's own scope cancels while its tool runs (a race's loser, a deadline)
follows its in-doubt policy (issue 25, "a write cancelled while running follows its in-doubt
policy"; docs/retries.md "Cancelled while running").

Before: every such call was settled ``cancelled`` with "may or may not have taken effect",
whatever its policy: a reconciled write's reconcile function was never asked, and a plain
write that may have happened was shown to nobody.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import attrs
import pytest
from actorlog import Actor, ActorSystem, Context, Happened, NotHappened, ops, tool
from actorlog._views.html import render_history
from actorlog.errors import ConfigurationError
from actorlog.store import Store
from actorlog.stores import SqliteStore

from tests.cli._support import cli
from tests.conftest import StoreFactory

pytestmark = pytest.mark.anyio

#: what the reconcile function answers, and what it was asked (per test)
ANSWER: dict[str, Any] = {}
STARTED: dict[str, anyio.Event] = {}


async def _reconcile(key: str, args: dict[str, Any]) -> Happened | NotHappened | None:
    ANSWER.setdefault("asked", []).append(args["tag"])
    await anyio.lowlevel.checkpoint()  # runs though the handler scope is cancelled
    if ANSWER["happened"]:
        return Happened(f"charged {args['tag']}")
    return NotHappened()


@tool(effect="write", name="cancelwrite.charge", reconcile=_reconcile)
async def charge(tag: str) -> str:
    STARTED["write"].set()
    await anyio.sleep_forever()  # the race's winner cancels it while it runs
    return tag


@tool(effect="write", name="cancelwrite.transfer")
async def transfer(tag: str) -> str:
    STARTED["write"].set()
    await anyio.sleep_forever()  # the handler's deadline cancels it while it runs
    return tag


@tool(effect="read", name="cancelwrite.lookup")
async def lookup(tag: str) -> str:
    STARTED["write"].set()
    await anyio.sleep_forever()
    return tag


@tool(effect="read", name="cancelwrite.quick")
async def quick(tag: str) -> str:
    await STARTED["write"].wait()  # wins once the loser's tool is running
    return tag


@attrs.define
class Race:
    loser: str  # "charge" or "lookup"


@attrs.define
class Deadline:
    pass


@attrs.define
class Count:
    steps: int = 0


class Agent(Actor[Count]):
    name = "cancelwrite.Agent"

    async def receive(self, ctx: Context, msg: Race | Deadline) -> str:
        self.state.steps += 1
        if isinstance(msg, Deadline):
            with anyio.move_on_after(0.2):  # the handler's own deadline
                await ctx.call(transfer, "t1")
            return "went on"
        won: list[str] = []
        loser = charge if msg.loser == "charge" else lookup

        async def run(t: Any, tag: str) -> None:
            won.append(await ctx.call(t, tag))
            tg.cancel_scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(run, loser, "c1")
            tg.start_soon(run, quick, "q1")
        return won[0]


def _fresh() -> None:
    ANSWER.clear()
    STARTED["write"] = anyio.Event()


@pytest.mark.parametrize("happened", [True, False])
async def test_a_reconciled_write_losing_a_race_records_its_reconcile_answer(
    make_store: StoreFactory, happened: bool
) -> None:
    _fresh()
    ANSWER["happened"] = happened
    async with ActorSystem(make_store(), actors=[Agent]) as system:
        ref = await system.spawn(Agent, "a")
        assert await ref.ask(Race("charge"), message_id="r1") == "q1"
        h = await ops.history(system.store, "a")
    assert ANSWER["asked"] == ["c1"]
    (step,) = h.steps
    assert step.status == "ok" and step.reply == "q1"
    (lost,) = [c for c in step.calls if c.tool == "cancelwrite.charge"]
    assert lost.settled_by == "cancelled" and lost.status == "error"
    assert lost.reconciled == ("happened" if happened else "not_happened")
    assert lost.reconciled_value == ("charged c1" if happened else None)
    assert not lost.in_doubt and not lost.needs_ruling
    # replay after a restart takes the same path, and asks nothing again
    async with ActorSystem(make_store(), actors=[Agent]) as system:
        ref = await system.spawn(Agent, "a")
        assert await ref.ask(Race("charge"), message_id="r1") == "q1"  # deduplicated
        assert await ref.ask(Race("lookup"), message_id="r2") == "q1"  # it goes on
        after = await ops.history(system.store, "a")
    assert ANSWER["asked"] == ["c1"]
    assert [(c.tool, c.status, c.reconciled) for c in after.steps[0].calls] == [
        (c.tool, c.status, c.reconciled) for c in step.calls
    ]


async def test_a_read_losing_a_race_stays_plain_cancelled(make_store: StoreFactory) -> None:
    _fresh()
    async with ActorSystem(make_store(), actors=[Agent]) as system:
        ref = await system.spawn(Agent, "a")
        assert await ref.ask(Race("lookup"), message_id="r1") == "q1"
        (step,) = (await ops.history(system.store, "a")).steps
    (lost,) = [c for c in step.calls if c.tool == "cancelwrite.lookup"]
    assert lost.settled_by == "cancelled" and lost.status == "error"
    assert not lost.in_doubt and lost.reconciled is None and not lost.needs_ruling


async def test_an_escalated_write_cancelled_by_a_deadline_waits_for_a_ruling(
    make_store: StoreFactory,
) -> None:
    _fresh()
    async with ActorSystem(make_store(), actors=[Agent]) as system:
        ref = await system.spawn(Agent, "a")
        assert await ref.ask(Deadline(), message_id="d1") == "went on"
        await _rule_on_it(system.store)
    # replay after a restart takes the live path: the step is not run again
    async with ActorSystem(make_store(), actors=[Agent]) as system:
        ref = await system.spawn(Agent, "a")
        assert await ref.ask(Deadline(), message_id="d1") == "went on"
        assert await ref.ask(Deadline(), message_id="d2") == "went on"
        h = await ops.history(system.store, "a")
    assert len(h.steps) == 2 and h.steps[0].calls[0].ruling is not None
    assert h.steps[0].calls[0].status == "error" and h.steps[1].calls[0].needs_ruling


async def _rule_on_it(store: Store) -> None:
    (step,) = (await ops.history(store, "a")).steps
    assert step.status == "ok" and step.reply == "went on"  # the handler went on
    (call,) = step.calls
    assert call.settled_by == "cancelled" and call.in_doubt and call.needs_ruling
    # listed for the operator
    listed = await ops.calls_needing_ruling(store, "a")
    assert [c.intent_seq for c in listed] == [call.intent_seq]
    # an operator rules that it happened: recorded, the step is unchanged
    d = await ops.resolve(store, "a", call.intent_seq, result="done t1", reason="bank says so")
    assert d.action == "result"
    h = await ops.history(store, "a")
    (call2,) = h.steps[0].calls
    assert not call2.needs_ruling
    assert call2.ruling is not None and call2.decisions == []  # not in the log
    assert (call2.ruling.action, call2.ruling.value) == ("result", "done t1")
    assert call2.status == "error" and call2.settled_by == "cancelled"  # the step's path
    assert h.steps[0].reply == "went on"
    assert await ops.calls_needing_ruling(store, "a") == []
    assert not (await ops.verify(store, "a")).findings
    # a second ruling, and a retry, are refused: nothing stored
    last = (await ops.actor_status(store, "a")).last_seq
    events = len(await store.read_events("a"))
    with pytest.raises(ConfigurationError):
        await ops.resolve(store, "a", call.intent_seq, fail="no")
    with pytest.raises(ConfigurationError):
        await ops.resolve(store, "a", call.intent_seq, retry=True)
    assert (await ops.actor_status(store, "a")).last_seq == last
    assert len(await store.read_events("a")) == events


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_actorlog_history_and_resolve_show_and_rule_a_cancelled_write(
    tmp_path: Path,
) -> None:
    """The operator's path through the real CLI on a SQLite file: `actorlog history` shows
    the call needs a ruling, `actorlog resolve --retry` is refused, `--fail` records it, and
    the history (text and HTML export) shows the ruling; the log is not written."""
    _fresh()
    db = tmp_path / "agents.db"
    async with ActorSystem(SqliteStore(db), actors=[Agent]) as system:
        ref = await system.spawn(Agent, "a")
        assert await ref.ask(Deadline(), message_id="d1") == "went on"
        (step,) = (await ops.history(system.store, "a")).steps
        seq = step.calls[0].intent_seq
        last = (await ops.actor_status(system.store, "a")).last_seq
    r = cli("history", db, "a")
    assert r.code == 0, r.err
    assert "in doubt: needs a ruling (actorlog resolve --result | --fail)" in r.out
    r = cli("resolve", db, "a", str(seq), "--retry")
    assert r.code == 2 and "a retry cannot run" in r.err
    r = cli("resolve", db, "a", str(seq), "--fail", "the bank has no such transfer")
    assert r.code == 0, r.err
    r = cli("history", db, "a")
    assert "needs a ruling" not in r.out and ": it did not happen" in r.out, r.out
    page = tmp_path / "h.html"
    assert cli("history", db, "a", "--html", page).code == 0
    assert ": it did not happen" in page.read_text()
    store = SqliteStore(db)
    await store.open()
    try:
        assert (await ops.actor_status(store, "a")).last_seq == last  # the log is as it was
    finally:
        await store.close()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_actorlog_actors_lists_cancelled_writes_needing_a_ruling(tmp_path: Path) -> None:
    """`actorlog actors` lists the calls waiting for an operator: the cancelled writes
    needing a ruling too, with the line that rules (before: only steps waiting for a
    decision were listed); gone once ruled."""
    _fresh()
    db = tmp_path / "agents.db"
    async with ActorSystem(SqliteStore(db), actors=[Agent]) as system:
        ref = await system.spawn(Agent, "a")
        assert await ref.ask(Deadline(), message_id="d1") == "went on"
        (call,) = await ops.calls_needing_ruling(system.store, "a")
        with anyio.fail_after(10):  # the runtime's in_doubt event, recorded in the background
            while not await system.store.read_events("a"):
                await anyio.sleep(0.01)
    r = cli("actors", db)
    assert r.code == 0, r.err
    assert "1 cancelled write(s) need a ruling:" in r.out
    assert f'a intent {call.intent_seq}: cancelwrite.transfer("t1") (handler)' in r.out
    assert f"actorlog resolve {db} a {call.intent_seq} --result JSON | --fail MESSAGE" in r.out
    (row,) = cli("actors", db, "--json").json_lines()  # and in JSON, under the actor
    (wanted,) = row["needs_ruling"]
    assert (wanted["intent_seq"], wanted["tool"], wanted["needs_ruling"]) == (
        call.intent_seq,
        "cancelwrite.transfer",
        True,
    )
    assert cli("resolve", db, "a", str(call.intent_seq), "--result", '"ok"').code == 0
    assert "need a ruling" not in cli("actors", db).out
    (row,) = cli("actors", db, "--json").json_lines()
    assert row["needs_ruling"] == []


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_html_export_counts_cancelled_writes_needing_a_ruling(tmp_path: Path) -> None:
    """`actorlog history --html`'s header lists the calls waiting for an operator: a
    cancelled write needing a ruling too, with the command that rules (before: only steps
    waiting for a decision; the call showed only in the timeline)."""
    _fresh()
    db = tmp_path / "agents.db"
    async with ActorSystem(SqliteStore(db), actors=[Agent]) as system:
        ref = await system.spawn(Agent, "a")
        assert await ref.ask(Deadline(), message_id="d1") == "went on"
        (call,) = await ops.calls_needing_ruling(system.store, "a")
        whole = render_history(await ops.history(system.store, "a"), source=str(db))
    page = tmp_path / "h.html"
    assert cli("history", db, "a", "--html", page).code == 0  # the streamed page
    for text in (page.read_text(), whole):
        assert "1 tool call(s) may or may not have happened" in text
        assert f"actorlog resolve {db} a {call.intent_seq} --result JSON | --fail MESSAGE" in text
