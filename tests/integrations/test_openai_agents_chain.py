"""An OpenAI Agents SDK DurableAgent run's reply holds only its new items, and each model
call's fingerprint only what is new since the conversation's previous call, chained to it
(issue 25, FORMAT.md [F23]); the caller still gets the whole conversation
(``DurableRunResult.items``), rebuilt from the chain of replies in the log, in a new system
too; logs with whole fingerprints resume."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from actorlog import ActorQuarantinedError, ActorSystem, NonDeterminismError
from actorlog.integrations import _openai_models
from actorlog.integrations.openai_agents import IDEMPOTENT, READ, AgentActor, DurableAgent
from actorlog.stores import SqliteStore
from agents import RunConfig
from agents.run_config import CallModelData, ModelInputData

from tests._payload import payload_of
from tests.integrations import make_oai_chain_fixture as fixture, openai_travel
from tests.integrations.openai_travel import TravelModel

FIXTURE = Path(__file__).with_name("fixtures") / "oai_whole_fingerprints_v0.db"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the SDK runs on asyncio


def durable() -> DurableAgent[Any]:
    return DurableAgent(
        openai_travel.triage,
        name="t-chain",
        tools={"search": READ, "weather": "read", "book": IDEMPOTENT},
        run_config=RunConfig(model=TravelModel()),
    )


def replies(store: Path) -> list[dict[str, Any]]:
    with closing(sqlite3.connect(store)) as db:
        rows = db.execute("SELECT payload FROM entries WHERE kind = 'step' ORDER BY seq")
        return [payload_of("step", p)["reply"] for (p,) in rows.fetchall()]


@pytest.mark.anyio
async def test_a_run_replies_with_its_new_items_and_the_caller_gets_them_all(
    tmp_path: Path,
) -> None:
    store = tmp_path / "agents.db"
    cities = ["Lisbon", "Porto", "Oslo", "Rome"]
    agent = durable()
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        runs = [
            await agent.run(
                system, "c", f"plan a trip to {city}", message_id=city, new_conversation=i == 2
            )
            for i, city in enumerate(cities)
        ]
    lisbon, porto, oslo, rome = runs
    assert porto.items[: len(lisbon.items)] == lisbon.items
    assert porto.items[len(lisbon.items) :] == porto.new_items
    assert oslo.items == oslo.new_items  # a new conversation
    assert rome.items[: len(oslo.items)] == oslo.items and rome.new_items[0]["role"] == "user"
    logged = replies(store)
    assert all("items" not in r for r in logged)
    assert [r["base"] is None for r in logged] == [True, False, True, False]
    assert [len(r["tail"]) for r in logged] == [len(r.new_items) for r in runs]

    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        again = [
            await durable().run(
                system, "c", f"plan a trip to {city}", message_id=city, new_conversation=i == 2
            )
            for i, city in enumerate(cities)
        ]
    assert again == runs


def fingerprints(store: Path, actor: str) -> list[str]:
    """The fingerprint of each model call the actor's log holds, by seq."""
    with closing(sqlite3.connect(store)) as db:
        got = db.execute(
            "SELECT payload FROM entries WHERE actor_id = ? AND kind = 'intent'"
            " AND type_tag = 'openai_agents.model_call' ORDER BY seq",
            (actor,),
        ).fetchall()
    return [str(payload_of("intent", p)["args"][1]) for (p,) in got]


def trip(i: int) -> str:
    return f"plan trip {i} to {fixture.CITIES[i % 4]}"


@pytest.mark.anyio
async def test_model_calls_are_fingerprinted_by_what_is_new_chained_across_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each model call's fingerprint covers the request with only the input items new since
    the conversation's previous call, chained to that call's fingerprint: what a call hashes
    does not grow with the conversation. A replay computes the same chain."""
    store = tmp_path / "agents.db"
    hashed: list[int] = []
    request_plain = _openai_models._request_plain

    def counting(*args: Any) -> bytes:
        hashed.append(len(args[1]))  # the input items the fingerprint covers
        return request_plain(*args)

    monkeypatch.setattr(_openai_models, "_request_plain", counting)
    agent = fixture.make("t-chain-fp")
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        results = [await agent.run(system, "c", trip(i), message_id=f"r{i}") for i in range(4)]
    assert len(results[3].items) > 30
    recorded = fingerprints(store, "c")
    assert len(recorded) == 20 and all(fp.startswith("c:") for fp in recorded)
    assert len(set(recorded)) == 20
    # the first call hashes the user's message; every later one the items the previous
    # call's response and its tool added, and the next run's first call the run's last
    # answer and the new user message: never the conversation so far
    assert len(hashed) == 20 and hashed[0] == 1 and max(hashed) <= 3
    hashed.clear()
    # a replay in a new system (no snapshot: every run is replayed) computes the same chain
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        more = await fixture.make("t-chain-fp").run(system, "c", trip(4), message_id="r4")
    assert fingerprints(store, "c")[:20] == recorded and len(fingerprints(store, "c")) == 25
    assert more.items[: len(results[3].items)] == results[3].items
    assert max(hashed) <= 3


@pytest.mark.anyio
async def test_a_changed_earlier_item_is_non_determinism(tmp_path: Path) -> None:
    """An input filter that now rewrites the conversation's first item: the replay of a later
    run (its state from a snapshot, the earlier runs not replayed) sends items that do not
    start with the ones the previous call sent, so its first call's fingerprint covers the
    whole request again, and differs from the recorded one."""
    store = tmp_path / "agents.db"
    shout: list[bool] = [False]

    def rewrite(data: CallModelData[Any]) -> ModelInputData:
        return _upper_first(data) if shout[0] else data.model_data

    durable = fixture.make("t-chain-changed", call_model_input_filter=rewrite)
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        await system.spawn(AgentActor, "c", snapshot_every=2)
        for i in range(3):
            await durable.run(system, "c", trip(i), message_id=f"r{i}")
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        same = await durable.run(system, "c", trip(2), message_id="r2")  # replays r2: fine
    assert str(same.final_output).startswith("Trip to Rome")
    shout[0] = True
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        with pytest.raises(ActorQuarantinedError) as info:
            await durable.run(system, "c", trip(2), message_id="r2")
    assert isinstance(info.value.__cause__, NonDeterminismError)
    assert "openai_agents.model_call" in str(info.value.__cause__)


@pytest.mark.anyio
async def test_logs_with_whole_fingerprints_resume(tmp_path: Path) -> None:
    """``fixtures/oai_whole_fingerprints_v0.db`` (make_oai_chain_fixture.py): model calls
    fingerprinted whole, one conversation with a snapshot; each stopped while its fourth
    run's ``search`` ran. They resume (the recorded calls checked as they were logged: a
    changed agent is still caught), and the calls after them chain."""
    store = tmp_path / "old.db"
    shutil.copyfile(FIXTURE, store)
    durable = fixture.make()
    ask = [f"plan a trip to {city}" for city in fixture.CITIES]
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        for actor in ("snap", "plain"):
            old = [await durable.run(system, actor, ask[i], message_id=f"r{i}") for i in range(3)]
            resumed = await durable.run(system, actor, ask[3], message_id="r3")
            later = await durable.run(system, actor, "plan a trip to Bern", message_id="r4")
            assert [str(r.final_output).split(":")[0] for r in [*old, resumed, later]] == [
                f"Trip to {city}" for city in [*fixture.CITIES, "Bern"]
            ]
            assert resumed.items[: len(old[2].items)] == old[2].items
            assert later.items[: len(resumed.items)] == resumed.items
            fps = fingerprints(store, actor)
            # r0..r2 and r3's first two calls as recorded; r3's next calls start the chain
            assert [fp.startswith("c:") for fp in fps] == [False] * 17 + [True] * 8
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        for actor in ("snap", "plain"):
            again = await durable.run(system, actor, "plan a trip to Bern", message_id="r4")
            assert str(again.final_output).startswith("Trip to Bern")
            more = await durable.run(system, actor, ask[0], message_id="r5")
            assert more.items[: len(again.items)] == again.items
    # a changed agent is caught at a call recorded whole, as before
    changed = fixture.make(call_model_input_filter=_upper_first)
    store2 = tmp_path / "old2.db"
    shutil.copyfile(FIXTURE, store2)
    async with ActorSystem(SqliteStore(store2), actors=[AgentActor]) as system:
        with pytest.raises(ActorQuarantinedError) as info:
            await changed.run(system, "plain", ask[3], message_id="r3")
    assert isinstance(info.value.__cause__, NonDeterminismError)


def _upper_first(data: CallModelData[Any]) -> ModelInputData:
    """An input filter that rewrites the first item (the conversation's first message)."""
    items: list[Any] = list(data.model_data.input)
    items[0] = {**items[0], "content": str(items[0]["content"]).upper()}
    return ModelInputData(input=items, instructions=data.model_data.instructions)


class _ChainReads(SqliteStore):
    """``SqliteStore`` that counts the reads of step entries (the chain of replies)."""

    chain_reads = 0

    async def read(self, actor_id: str, **kwargs: Any) -> Any:
        if list(kwargs.get("kinds") or []) == ["step"]:
            self.chain_reads += 1
        return await super().read(actor_id, **kwargs)


@pytest.mark.anyio
async def test_the_next_run_reads_its_base_reply_not_the_chain(tmp_path: Path) -> None:
    """The caller keeps the conversation it rebuilt (``ChainCache``): a run continuing it
    reads one reply instead of the chain, and its items are those the chain gives."""
    store = _ChainReads(tmp_path / "agents.db")
    agent = durable()
    cities = ["Lisbon", "Porto", "Oslo", "Rome"]
    async with ActorSystem(store, actors=[AgentActor]) as system:
        runs = [await agent.run(system, "c", f"plan a trip to {c}", message_id=c) for c in cities]
        assert store.chain_reads == 1  # the second run's (the old code: one per later run)
        from_log = [await agent.result(system, "c", r) for r in replies(Path(store.path))]
    assert [r.items for r in runs] == [r.items for r in from_log]
