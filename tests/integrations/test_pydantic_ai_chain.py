"""A DurableAgent run's reply holds only its new messages, and each model request's
fingerprint only what is new since the conversation's previous request, chained to it
(issue 25, FORMAT.md [F23]): the log grows with the conversation, not with its square. The
caller still gets the whole conversation (``DurableRunResult.messages``), rebuilt from the
chain of replies: in a new system, after compaction, from logs of the earlier form."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from actorlog import (
    ActorQuarantinedError,
    ActorSystem,
    ConfigurationError,
    NonDeterminismError,
    ops,
)
from actorlog.errors import CorruptEntryError
from actorlog.integrations._replies import reply_fields, whole
from actorlog.integrations.pydantic_ai import (
    READ,
    AgentActor,
    DurableAgent,
    DurableRunResult,
    RunPrompt,
)
from actorlog.stores import PostgresStore, SqliteStore
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessagesTypeAdapter, ToolCallPart
from pydantic_ai.models.function import FunctionModel

from tests import _pg
from tests._payload import payload_of
from tests.integrations.make_pai_chain_fixture import fn

FIXTURE = Path(__file__).with_name("fixtures") / "pai_whole_replies_v0.db"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # pydantic-ai runs its tool calls as asyncio tasks


def make(name: str, prompt: list[str] | None = None) -> DurableAgent[None, str]:
    """Each run: a model request answered with a tool call, the tool, a request answered
    with text (4 new messages). ``prompt``: a dynamic system prompt, read at each run."""
    agent = Agent(FunctionModel(fn, model_name="chain"), name=name)
    if prompt is not None:

        @agent.system_prompt(dynamic=True)
        def system() -> str:
            return prompt[0]

    @agent.tool_plain
    async def lookup(q: str) -> str:
        return f"found {q}"

    return DurableAgent(agent, tools={"lookup": READ})


def rows(store: Path, actor: str, kind: str) -> list[tuple[int, dict[str, Any], int]]:
    """(seq, payload, stored size) of the actor's entries of ``kind``, by seq."""
    with closing(sqlite3.connect(store)) as db:
        got = db.execute(
            "SELECT seq, payload FROM entries WHERE actor_id = ? AND kind = ? ORDER BY seq",
            (actor, kind),
        ).fetchall()
    return [(seq, payload_of(kind, p), len(p)) for seq, p in got]


def fingerprints(store: Path, actor: str) -> list[str]:
    """The messages fingerprint of each model request the actor's log holds, by seq."""
    with closing(sqlite3.connect(store)) as db:
        got = db.execute(
            "SELECT payload FROM entries WHERE actor_id = ? AND kind = 'intent'"
            " AND type_tag = 'pydantic_ai.model_request' ORDER BY seq",
            (actor,),
        ).fetchall()
    return [str(payload_of("intent", p)["args"][1]) for (p,) in got]


def plain(result: DurableRunResult[Any]) -> list[Any]:
    return list(ModelMessagesTypeAdapter.dump_python(result.messages, mode="json"))


def timeless(value: Any) -> Any:
    """``value`` without its ``timestamp`` keys, at any depth."""
    if isinstance(value, dict):
        return {k: timeless(v) for k, v in value.items() if k != "timestamp"}
    if isinstance(value, list):
        return [timeless(v) for v in value]
    return value


@pytest.mark.anyio
async def test_a_run_replies_with_its_new_messages_and_the_caller_gets_them_all(
    tmp_path: Path,
) -> None:
    store = tmp_path / "agents.db"
    durable = make("t-chain-new")
    results = []
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        for i in range(6):
            results.append(await durable.run(system, "c", f"q{i}", message_id=f"q{i}"))
    for i, r in enumerate(results):
        assert r.output == f"answer found q{i}"
        assert len(r.messages) == 4 * (i + 1) and len(r.new_messages) == 4
        if i:  # the conversation so far, then this run's
            assert plain(r)[: 4 * i] == plain(results[i - 1])
    steps = rows(store, "c", "step")
    replies = [payload["reply"] for _, payload, _ in steps]
    assert all("messages" not in reply for reply in replies)
    assert [len(reply["tail"]) for reply in replies] == [4] * 6
    assert [reply["keep"] for reply in replies] == [4 * i for i in range(6)]
    first, *_, last = [size for _, _, size in steps]
    assert last < first + 64  # the sixth run's reply is about as big as the first's

    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        again = [
            await make("t-chain-new").run(system, "c", f"q{i}", message_id=f"q{i}")
            for i in range(6)
        ]
    assert [plain(r) for r in again] == [plain(r) for r in results]
    assert [r.new_messages for r in again] == [r.new_messages for r in results]


@pytest.mark.anyio
async def test_model_requests_are_fingerprinted_by_what_is_new_chained_across_runs(
    tmp_path: Path,
) -> None:
    store = tmp_path / "agents.db"
    durable = make("t-chain-fp")
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        for i in range(3):
            await durable.run(system, "c", f"q{i}", message_id=f"q{i}")
    recorded = fingerprints(store, "c")
    assert len(recorded) == 6 and all(fp.startswith("c:") for fp in recorded)
    assert len(set(recorded)) == 6
    # a replay in a new system computes the same chain (nothing is called)
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        await make("t-chain-fp").run(system, "c", "q3", message_id="q3")
    assert fingerprints(store, "c")[:6] == recorded


@pytest.mark.anyio
async def test_a_changed_earlier_message_is_non_determinism(tmp_path: Path) -> None:
    """The system prompt is the conversation's first message. Changed, the replay of a
    later run (its state from a snapshot: the earlier runs are not replayed) makes
    pydantic-ai put another first message into the history: that request's fingerprint
    covers the whole request again, and differs from the recorded one."""
    store = tmp_path / "agents.db"
    prompt = ["be brief"]
    durable = make("t-chain-changed", prompt)
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        await system.spawn(AgentActor, "c", snapshot_every=2)
        for i in range(3):
            await durable.run(system, "c", f"q{i}", message_id=f"q{i}")
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        same = await durable.run(system, "c", "q2", message_id="q2")  # replays q2: fine
    assert same.output == "answer found q2"
    prompt[0] = "be verbose"
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        with pytest.raises(ActorQuarantinedError) as info:
            await durable.run(system, "c", "q2", message_id="q2")
    assert isinstance(info.value.__cause__, NonDeterminismError)
    assert "pydantic_ai.model_request" in str(info.value.__cause__)


@pytest.mark.anyio
async def test_the_whole_conversation_after_compaction(tmp_path: Path) -> None:
    """Compaction removed the start of the chain (the replies of the first runs): the
    snapshot the kept log starts at holds the conversation it continues."""
    store = tmp_path / "agents.db"
    durable = make("t-chain-compact")
    results = []
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        await system.spawn(
            AgentActor, "c", snapshot_every=2, snapshot_keep=2, retention="since-snapshot"
        )
        for i in range(7):
            results.append(await durable.run(system, "c", f"q{i}", message_id=f"q{i}"))
    async with ops.opened(f"sqlite:///{store}", read_only=False) as opened:
        await ops.compact(opened, "c")
    with closing(sqlite3.connect(store)) as db:
        kept = [m for (m,) in db.execute("SELECT message_id FROM entries WHERE kind = 'message'")]
    assert "q0" not in kept and "q5" in kept
    first_kept = rows(store, "c", "step")[0][1]["reply"]
    assert first_kept["base"] is not None
    assert not rows(store, "c", "message")[0][0] <= first_kept["base"]  # compacted away
    asked = [f"q{i}" for i in range(7) if f"q{i}" in kept]
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        for mid in asked:
            i = int(mid[1:])
            got = await make("t-chain-compact").run(system, "c", mid, message_id=mid)
            assert timeless(plain(got)) == timeless(plain(results[i])), mid
        # and the conversation goes on
        more = await durable.run(system, "c", "q7", message_id="q7")
    # the state q7 continued was rebuilt by replaying q6, whose requests then carry the time
    # of the replay (docs/pydantic-ai.md, "Clock readings in the history")
    assert timeless(plain(more)[:28]) == timeless(plain(results[6]))
    assert len(more.messages) == 32


@pytest.mark.anyio
async def test_logs_with_whole_conversation_replies_resume_and_read(tmp_path: Path) -> None:
    """``fixtures/pai_whole_replies_v0.db`` (make_pai_chain_fixture.py): replies holding the
    whole conversation, whole-request fingerprints, one conversation with a snapshot of a
    state without ``run_seq``; each stopped while its fourth run's tool call ran. They
    resume (the recorded requests checked as they were logged), the recorded replies read
    as before, and later runs chain onto them."""
    store = tmp_path / "old.db"
    shutil.copyfile(FIXTURE, store)
    durable = make("chain")
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        for actor in ("snap", "plain"):
            old = [await durable.run(system, actor, f"q{i}", message_id=f"q{i}") for i in range(3)]
            resumed = await durable.run(system, actor, "q3", message_id="q3")
            later = await durable.run(system, actor, "q4", message_id="q4")
            assert [r.output for r in old] == [f"answer found q{i}" for i in range(3)]
            assert plain(old[1])[:4] == plain(old[0]) and plain(old[2])[:8] == plain(old[1])
            assert resumed.output == "answer found q3" and later.output == "answer found q4"
            assert plain(resumed)[:12] == plain(old[2]) and len(resumed.new_messages) == 4
            assert plain(later)[:16] == plain(resumed) and len(later.messages) == 20
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        for actor in ("snap", "plain"):
            again = await durable.run(system, actor, "q4", message_id="q4")
            assert len(again.messages) == 20 and again.output == "answer found q4"
    for actor in ("snap", "plain"):
        replies = [p["reply"] for _, p, _ in rows(store, actor, "step")]
        assert ["messages" in r for r in replies] == [True, True, True, False, False]
        # q2 (message seq 17), replayed, was recorded whole: the chains start there, and a
        # caller reads no whole reply but q2's
        assert [r["base"] for r in replies[3:]] == [17, replies[3]["run"]]
        assert [r["origin"] for r in replies[3:]] == [17, 17]
        fps = fingerprints(store, actor)
        # q0..q2 and q3's first request as recorded; q3's second request starts the chain
        assert [fp.startswith("c:") for fp in fps] == [False] * 7 + [True] * 3


def test_a_reply_from_a_state_without_run_seq_holds_the_whole_conversation() -> None:
    """A state recovered from a snapshot written before the chain does not say which run
    its history is: that run's reply is in the old form, and ends the chain."""
    history, everything = [{"m": 1}], [{"m": 1}, {"m": 2}]
    fields, origin = reply_fields("messages", history, everything, base=0, origin=0, run_seq=9)
    assert fields == {"messages": everything} and origin == 9
    fields, origin = reply_fields("messages", history, everything, base=5, origin=1, run_seq=9)
    assert fields == {"run": 9, "base": 5, "keep": 1, "tail": [{"m": 2}], "origin": 1}
    fields, origin = reply_fields("messages", [], everything, base=5, origin=1, run_seq=9)
    assert fields["base"] is None and fields["tail"] == everything and origin == 9


@pytest.mark.anyio
async def test_a_reply_that_is_not_one_is_refused_at_the_call(tmp_path: Path) -> None:
    durable = make("t-chain-bad")
    async with ActorSystem(SqliteStore(tmp_path / "a.db"), actors=[AgentActor]) as system:
        await durable.run(system, "c", "q0", message_id="q0")
        ref = await system.spawn(AgentActor, "c")
        reply = await ref.ask(RunPrompt(durable.name, "q1"), message_id="q1")
        assert len((await durable.result(system, "c", reply)).messages) == 8
        bad: list[Any] = [{**reply, "base": reply["run"]}, {**reply, "keep": -1}, {"tail": []}]
        for not_a_reply in [*bad, [1]]:
            with pytest.raises(ConfigurationError):
                await durable.result(system, "c", not_a_reply)


@pytest.mark.anyio
async def test_a_reply_of_another_conversation_is_refused(tmp_path: Path) -> None:
    """A reply handed to ``result`` with another conversation's id: its chain would be read
    against that conversation's log (another history with this reply's tail); refused."""
    durable = make("t-chain-other")
    async with ActorSystem(SqliteStore(tmp_path / "a.db"), actors=[AgentActor]) as system:
        for i in range(2):
            await durable.run(system, "a", f"a{i}", message_id=f"a{i}")
        for i in range(3):  # b's log holds a step at the seq of a's reply (and its base)
            await durable.run(system, "b", f"b{i}", message_id=f"b{i}")
        ref = await system.spawn(AgentActor, "a")
        reply = await ref.ask(RunPrompt(durable.name, "a2"), message_id="a2")
        assert len((await durable.result(system, "a", reply)).messages) == 12
        for other in ("b", "nobody"):
            with pytest.raises(ConfigurationError, match="not the reply of a run of"):
                await durable.result(system, other, reply)


@pytest.mark.anyio
async def test_a_chain_whose_start_is_gone_is_a_named_error(tmp_path: Path) -> None:
    """Compaction removed the start of the chain and the snapshots that held it are gone
    (deleted by hand): the conversation cannot be rebuilt, and the error says why."""
    store = tmp_path / "agents.db"
    durable = make("t-chain-gone")
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        await system.spawn(
            AgentActor, "c", snapshot_every=2, snapshot_keep=2, retention="since-snapshot"
        )
        for i in range(5):
            await durable.run(system, "c", f"q{i}", message_id=f"q{i}")
    async with ops.opened(f"sqlite:///{store}", read_only=False) as opened:
        await ops.compact(opened, "c")
    with closing(sqlite3.connect(store)) as db:
        db.execute("DELETE FROM snapshots")
        db.commit()
    reply = rows(store, "c", "step")[-1][1]["reply"]
    sqlite_store = SqliteStore(store)
    await sqlite_store.open()
    try:
        with pytest.raises(CorruptEntryError) as info:
            await whole(sqlite_store, "c", reply, "messages")
    finally:
        await sqlite_store.close()
    assert info.value.actor_id == "c" and "neither the log nor a snapshot" in str(info.value)


@pytest.fixture
def pg_url() -> str:
    return _pg.postgres_url("a pydantic-ai conversation read by a client on PostgreSQL")


@pytest.fixture
async def pg_schema(pg_url: str) -> AsyncIterator[str]:
    schema = _pg.new_schema("actorlog_pai_chain")
    yield schema
    await _pg.drop_schemas(pg_url, schema)


@pytest.mark.anyio
async def test_a_client_on_postgres_gets_the_whole_conversation(
    pg_url: str, pg_schema: str
) -> None:
    """The runtime that owns the conversation runs it; a client-mode system in the same
    database asks for the runs and rebuilds each whole conversation from the chain of
    replies in the shared log."""
    durable = make("t-chain-pg")
    runtime = ActorSystem(
        PostgresStore(pg_url, schema=pg_schema), actors=[AgentActor], owner="r", lease_ttl=2.0
    )
    client = ActorSystem(PostgresStore(pg_url, schema=pg_schema), client=True)
    async with runtime, client:
        owned = [await durable.run(runtime, "c", f"q{i}", message_id=f"q{i}") for i in range(3)]
        remote = [
            await durable.run(client, "c", f"q{i}", message_id=f"q{i}", timeout=30)
            for i in range(4)
        ]
    assert [plain(r) for r in remote[:3]] == [plain(r) for r in owned]
    assert plain(remote[3])[:12] == plain(owned[2]) and len(remote[3].new_messages) == 4


class CountingStore(SqliteStore):
    """``SqliteStore`` that counts the reads of step entries (the chain of replies) and the
    look-ups of one step (``find_ref``)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.chain_reads = 0
        self.step_lookups = 0

    async def read(self, actor_id: str, **kwargs: Any) -> Any:
        if list(kwargs.get("kinds") or []) == ["step"]:
            self.chain_reads += 1
        return await super().read(actor_id, **kwargs)

    async def find_ref(self, actor_id: str, kind: str, ref: int) -> Any:
        if kind == "step":
            self.step_lookups += 1
        return await super().find_ref(actor_id, kind, ref)


@pytest.mark.anyio
async def test_the_next_run_of_a_conversation_reads_its_base_reply_not_the_chain(
    tmp_path: Path,
) -> None:
    """A caller keeps the conversation it rebuilt (``ChainCache``): the next run's reply
    continues it, so the caller reads one reply (the base's, to check it) instead of the
    chain; the results are those the chain gives, and share no object."""
    store = CountingStore(tmp_path / "agents.db")
    durable = make("t-chain-kept")
    results = []
    async with ActorSystem(store, actors=[AgentActor]) as system:
        for i in range(2):
            results.append(await durable.run(system, "c", f"q{i}", message_id=f"q{i}"))
        reads, lookups = store.chain_reads, store.step_lookups
        for i in range(2, 6):
            results.append(await durable.run(system, "c", f"q{i}", message_id=f"q{i}"))
            # a caller's edit of a result changes nothing another result or the cache holds
            call = results[-1].messages[1].parts[0]
            assert isinstance(call, ToolCallPart)
            args: Any = call.args
            assert args == {"q": "q0"}
            args["q"] = "edited"
        assert store.chain_reads == reads  # the old code: one read of the chain per run
        assert store.step_lookups - lookups == 4
        replies = [payload["reply"] for _, payload, _ in rows(tmp_path / "agents.db", "c", "step")]
        read_again = [await durable.result(system, "c", reply) for reply in replies]
    for i, r in enumerate(results):
        assert r.output == f"answer found q{i}"
        assert len(r.messages) == 4 * (i + 1)
    expected = [plain(r) for r in read_again]
    assert all(got[1]["parts"][0]["args"] == {"q": "q0"} for got in expected)
    for i, got in enumerate([plain(r) for r in results]):  # only its edit differs
        assert got[:1] + got[2:] == expected[i][:1] + expected[i][2:]


@pytest.mark.anyio
async def test_a_kept_conversation_is_used_only_if_the_log_holds_its_reply(
    tmp_path: Path,
) -> None:
    """An actor deleted and registered again has other replies at the same seqs: the kept
    conversation is used only when the log's reply of its run is the kept one."""
    store = CountingStore(tmp_path / "agents.db")
    durable = make("t-chain-stale")
    async with ActorSystem(store, actors=[AgentActor]) as system:
        for i in range(3):
            await durable.run(system, "c", f"q{i}", message_id=f"q{i}")
        (kept,) = durable._chains._kept.values()
        # as if another incarnation of "c" had replied at that seq with another conversation
        kept.texts = ['{"kind": "request", "parts": []}'] * len(kept.texts)
        reads = store.chain_reads
        r = await durable.run(system, "c", "q3", message_id="q3")
        assert store.chain_reads == reads + 1  # read from the chain, not from the cache
    assert len(r.messages) == 16
    assert [p["parts"][0]["content"] for p in plain(r)[::4]] == ["q0", "q1", "q2", "q3"]
