"""The core contract (DESIGN sections 2-5, 8) on every store and both async backends."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import attrs
import pytest
from actorlog import (
    Actor,
    ActorQuarantinedError,
    ActorStoppedError,
    ActorSystem,
    ConfigurationError,
    Context,
    CorruptEntryError,
    EncodeError,
    HandlerError,
    NonDeterminismError,
    ToolCallError,
    idempotency_key,
)
from actorlog.store import Store
from actorlog.stores import MemoryStore

from .._keys import Key
from .agents import CALLS, Add, Ask, Blocker, Notes, Other, Researcher, failing, search, slow_read

pytestmark = pytest.mark.anyio

StoreFactory = Callable[[], Store]


@pytest.fixture(autouse=True)
def _reset_calls() -> None:
    CALLS.reset()


@asynccontextmanager
async def running(
    make_store: StoreFactory, *actors: type[Actor[Any]], grace: float = 5.0
) -> AsyncIterator[ActorSystem]:
    async with ActorSystem(
        make_store(), actors=list(actors) or [Researcher], shutdown_grace=grace
    ) as system:
        yield system


async def kinds(make_store: StoreFactory, actor_id: str) -> list[str]:
    store = make_store()
    await store.open()
    try:
        return [r.kind for r in await store.read(actor_id)]
    finally:
        if not isinstance(store, MemoryStore):
            await store.close()


async def crash_mid_tool(make_store: StoreFactory, tool_name: str, question: str) -> None:
    """Run a Blocker step until it hangs inside ``tool_name``, then stop the system without
    grace: the tool's intent is logged and its result never is (a crash mid-tool)."""
    CALLS.hang = {tool_name}
    async with running(make_store, Blocker, grace=0) as system:
        ref = await system.spawn(Blocker, "b")
        await ref.send(Ask(question), message_id="m1")
        with anyio.fail_after(5):
            await CALLS.started.wait()
    CALLS.hang = set()


# -- the basic loop ---------------------------------------------------------------------------


async def test_ask_runs_the_handler_and_logs_every_entry_kind(make_store: StoreFactory) -> None:
    async with running(make_store) as system:
        ref = await system.spawn(Researcher, "r")
        assert await ref.ask(Ask("q")) == "found:q"
    # message, intent, result (search), intent, result (charge), step
    assert await kinds(make_store, "r") == [
        "message",
        "intent",
        "result",
        "intent",
        "result",
        "step",
    ]


async def test_existing_id_resumes_instead_of_starting_over(make_store: StoreFactory) -> None:
    async with running(make_store) as system:
        ref = await system.spawn(Researcher, "r")
        await ref.ask(Ask("a"))
        await ref.ask(Add(5))
    async with running(make_store) as system:
        ref = await system.spawn(Researcher, "r")
        assert await ref.ask(Add(1)) == "6"
    assert CALLS.count("search") == 1  # the completed step was replayed, not re-run


async def test_ask_with_same_message_id_returns_recorded_reply_after_restart(
    make_store: StoreFactory,
) -> None:
    async with running(make_store) as system:
        ref = await system.spawn(Researcher, "r")
        assert await ref.ask(Ask("q"), message_id="q-1") == "found:q"
        assert await ref.ask(Ask("q"), message_id="q-1") == "found:q"
    async with running(make_store) as system:
        ref = await system.spawn(Researcher, "r")
        assert await ref.ask(Ask("other"), message_id="q-1") == "found:q"
    assert CALLS.count("search") == 1
    assert CALLS.count("charge") == 1


async def test_handler_error_is_recorded_reraised_and_the_actor_goes_on(
    make_store: StoreFactory,
) -> None:
    async with running(make_store) as system:
        ref = await system.spawn(Researcher, "r")
        with pytest.raises(HandlerError) as info:
            await ref.ask(Ask("boom"), message_id="b")
        assert info.value.error_type == "ValueError"
        assert info.value.message == "bad question"
        assert await ref.ask(Add(2)) == "2"
    async with running(make_store) as system:
        ref = await system.spawn(Researcher, "r")
        with pytest.raises(HandlerError, match="bad question"):
            await ref.ask(Ask("ignored"), message_id="b")


async def test_message_type_the_handler_does_not_accept_is_a_handler_error(
    make_store: StoreFactory,
) -> None:
    async with running(make_store) as system:
        ref = await system.spawn(Researcher, "r")
        with pytest.raises(HandlerError, match="does not accept"):
            await ref.ask(Other(1))
        assert await ref.ask(Add(1)) == "1"


async def test_tool_error_is_recorded_and_replayed_identically(make_store: StoreFactory) -> None:
    seen: list[str] = []

    class Careful(Actor[Notes]):
        snapshot_every = None

        async def receive(self, ctx: Context, msg: Ask) -> str:
            try:
                await ctx.call(failing, msg.question)
            except ToolCallError as exc:
                seen.append(exc.error_type + ":" + exc.message)
                self.state.answers.append("failed")
            return "ok"

    async with running(make_store, Careful) as system:
        ref = await system.spawn(Careful, "c")
        assert await ref.ask(Ask("x")) == "ok"
    async with running(make_store, Careful) as system:
        await system.spawn(Careful, "c")
    assert seen == ["RuntimeError:no luck with x"] * 2
    assert CALLS.count("failing") == 1


# -- durability ordering ----------------------------------------------------------------------


class _WatchingStore:
    """Wraps a store and records the order of appends and tool runs."""

    def __init__(self, inner: Store, events: list[str]) -> None:
        self._inner = inner
        self.events = events

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def append(self, actor_id: str, expected: int, rows: Any) -> None:
        await self._inner.append(actor_id, expected, rows)
        self.events.append("durable:" + ",".join(r.kind for r in rows))


async def test_intent_is_durable_before_the_tool_runs_and_message_before_send_returns(
    make_store: StoreFactory,
) -> None:
    events: list[str] = []

    async def probe() -> str:
        events.append("tool ran")
        return "x"

    class Prober(Actor[Notes]):
        async def receive(self, ctx: Context, msg: Ask) -> str:
            return str(await ctx.call(probe))

    store = _WatchingStore(make_store(), events)
    async with ActorSystem(store, actors=[Prober]) as system:
        ref = await system.spawn(Prober, "p")
        await ref.send(Ask("a"))
        assert any(e.startswith("durable:") and "message" in e for e in events)
        await ref.ask(Ask("b"))
    ran = [i for i, e in enumerate(events) if e == "tool ran"]
    assert len(ran) == 2
    for i in ran:
        before = [e for e in events[:i] if e.startswith("durable:")]
        assert before and "intent" in before[-1]


# -- recovery ---------------------------------------------------------------------------------


async def test_start_recovers_actors_with_pending_messages_without_spawning(
    make_store: StoreFactory,
) -> None:
    await crash_mid_tool(make_store, "slow_read", "read:1")
    async with running(make_store, Blocker) as system:
        with anyio.fail_after(5):
            while system.status("b") not in ("idle",):
                await anyio.sleep(0.01)
        ref = system.ref(Blocker, "b")
        assert await ref.ask(Ask("next"), message_id="m1") == "read:read:1"
    # search ran once (served from the log on recovery), slow_read twice (in doubt: re-run)
    assert CALLS.count("search") == 1
    assert CALLS.count("slow_read") == 2


async def test_in_doubt_idempotent_write_reruns_with_the_same_key(make_store: StoreFactory) -> None:
    await crash_mid_tool(make_store, "charge", "charge:1")
    async with running(make_store, Blocker) as system:
        ref = await system.spawn(Blocker, "b")
        assert await ref.ask(Ask("x"), message_id="m1") == "charged 7"
    keys = [k for n, k in CALLS.log if n == "charge"]
    assert keys == [Key("b", 1, 1)] * 2 and keys[0] == keys[1]


async def test_in_doubt_plain_write_escalates_until_an_operator_supplies_the_result(
    make_store: StoreFactory,
) -> None:
    await crash_mid_tool(make_store, "send_email", "email:1")
    async with running(make_store, Blocker) as system:
        ref = await system.spawn(Blocker, "b")
        with anyio.fail_after(5):
            pending = await system.wait_in_doubt("b")
        assert system.status("b") == "in_doubt"
        ((intent_seq, (tool_name, key)),) = pending.items()
        assert tool_name.endswith("send_email") and key == Key("b", 1, 1)
        await system.resolve("b", intent_seq, result="sent by hand", reason="checked outbox")
        assert await ref.ask(Ask("x"), message_id="m1") == "sent by hand"
    assert CALLS.count("send_email") == 1  # never repeated
    assert "decision" in await kinds(make_store, "b")


async def test_in_doubt_resolved_with_retry_runs_the_tool_again(make_store: StoreFactory) -> None:
    await crash_mid_tool(make_store, "send_email", "email:1")
    async with running(make_store, Blocker) as system:
        ref = await system.spawn(Blocker, "b")
        with anyio.fail_after(5):
            (seq,) = await system.wait_in_doubt("b")
        await system.resolve("b", seq, retry=True)
        assert await ref.ask(Ask("x"), message_id="m1") == "sent to email:1"
    assert CALLS.count("send_email") == 2


async def test_in_doubt_resolved_with_fail_raises_in_the_handler(make_store: StoreFactory) -> None:
    await crash_mid_tool(make_store, "send_email", "email:1")
    async with running(make_store, Blocker) as system:
        ref = await system.spawn(Blocker, "b")
        with anyio.fail_after(5):
            (seq,) = await system.wait_in_doubt("b")
        await system.resolve("b", seq, fail="bounced")
        with pytest.raises(HandlerError, match="bounced"):
            await ref.ask(Ask("x"), message_id="m1")
    # the decision is durable: a restart replays the same failure without asking again
    async with running(make_store, Blocker) as system:
        ref = await system.spawn(Blocker, "b")
        with pytest.raises(HandlerError, match="bounced"):
            await ref.ask(Ask("x"), message_id="m1")
    assert CALLS.count("send_email") == 1


async def test_resolve_rejects_bad_arguments(make_store: StoreFactory) -> None:
    async with running(make_store, Blocker) as system:
        await system.spawn(Blocker, "b")
        with pytest.raises(ConfigurationError, match="exactly one"):
            await system.resolve("b", 3, result=1, retry=True)
        with pytest.raises(ConfigurationError, match="no in-doubt intent"):
            await system.resolve("b", 3, retry=True)


@pytest.mark.parametrize(
    ("answer", "expected", "pay_runs"), [("happened", "already paid 5", 1), ("not", "paid 5", 2)]
)
async def test_in_doubt_reconcile_decides(
    make_store: StoreFactory, answer: str, expected: str, pay_runs: int
) -> None:
    await crash_mid_tool(make_store, "pay", "pay:1")
    CALLS.reconcile_answer = answer
    async with running(make_store, Blocker) as system:
        ref = await system.spawn(Blocker, "b")
        assert await ref.ask(Ask("x"), message_id="m1") == expected
    assert CALLS.count("reconcile") == 1
    assert CALLS.count("pay") == pay_runs


async def test_reconcile_without_an_answer_escalates(make_store: StoreFactory) -> None:
    await crash_mid_tool(make_store, "pay", "pay:1")
    CALLS.reconcile_answer = None
    with anyio.fail_after(30):  # the exit does not spend its 60 s grace on the waiting step
        async with running(make_store, Blocker, grace=60) as system:
            await system.spawn(Blocker, "b")
            with anyio.fail_after(5):
                assert await system.wait_in_doubt("b")
    # still in doubt at the next start: the wait was cut, not settled
    async with running(make_store, Blocker) as system:
        await system.spawn(Blocker, "b")
        with anyio.fail_after(5):
            assert await system.wait_in_doubt("b")
        await system.resolve("b", next(iter(system.in_doubt("b"))), fail="not paid")


async def test_a_timeout_around_the_system_fires_even_while_it_exits(
    make_store: StoreFactory,
) -> None:
    """``fail_after`` around a system whose exit waits for a step: the step is cut and the
    caller gets its TimeoutError (on asyncio the exit used to absorb it and return as if
    everything had ended)."""
    CALLS.hang = {"charge"}
    with pytest.raises(TimeoutError), anyio.fail_after(0.5):
        async with running(make_store, Blocker, grace=30) as system:
            ref = await system.spawn(Blocker, "b")
            await ref.send(Ask("charge:1"), message_id="m1")
            await CALLS.started.wait()
    CALLS.hang = set()


async def test_nondeterministic_handler_is_stopped_and_no_tool_is_called(
    make_store: StoreFactory,
) -> None:
    mode = {"q": "first"}

    class Fickle(Actor[Notes]):
        snapshot_every = None

        async def receive(self, ctx: Context, msg: Ask) -> str:
            return str(await ctx.call(search, mode["q"]))

    async with running(make_store, Fickle) as system:
        ref = await system.spawn(Fickle, "f")
        await ref.ask(Ask("x"))
    mode["q"] = "second"
    async with running(make_store, Fickle, Researcher) as system:
        with pytest.raises(ActorQuarantinedError) as info:
            await system.spawn(Fickle, "f")
        cause = info.value.__cause__
        assert isinstance(cause, NonDeterminismError)
        assert cause.step_seq == 1 and "first" in cause.expected and "second" in cause.got
        assert system.status("f") == "quarantined"
        # the others keep running
        other = await system.spawn(Researcher, "r")
        assert await other.ask(Add(1)) == "1"
    assert [q for n, q in CALLS.log if n == "search"] == ["first"]


class _GatedFind(MemoryStore):
    """A MemoryStore whose ``find_message`` returns only once ``gate`` says so."""

    gate: Callable[[], Any] | None = None

    async def find_message(self, actor_id: str, message_id: str) -> Any:
        row = await super().find_message(actor_id, message_id)
        if self.gate is not None:
            await self.gate()
        return row


async def test_ask_again_while_the_resumed_step_hits_non_determinism_raises() -> None:
    """An ask with a logged message id looks the id up (an await); if the resumed step
    quarantines the actor meanwhile, the ask must get the quarantine error, not wait
    forever on a reply slot nothing will ever resolve (a hang seen in CI)."""
    mode = {"q": "first"}
    looking = anyio.Event()

    class Fickle(Actor[Notes]):
        snapshot_every = None

        async def receive(self, ctx: Context, msg: Ask) -> str:
            if mode["q"] == "second":  # resumed: let the ask reach its lookup first
                with anyio.fail_after(5):
                    await looking.wait()
            return str(await ctx.call(search, mode["q"]) + await ctx.call(slow_read, "r"))

    store = _GatedFind()
    CALLS.hang = {"slow_read"}
    async with ActorSystem(store, actors=[Fickle], shutdown_grace=0) as system:
        ref = await system.spawn(Fickle, "f")
        await ref.send(Ask("x"), message_id="m1")
        with anyio.fail_after(5):
            await CALLS.started.wait()
    CALLS.hang = set()
    mode["q"] = "second"  # the interrupted step, run again, no longer matches its log
    seen: list[str] = []

    async with ActorSystem(store, actors=[Fickle]) as system:

        async def until_quarantined() -> None:
            seen.append(system.status("f"))
            looking.set()
            with anyio.fail_after(5):
                while system.status("f") != "quarantined":
                    await anyio.sleep(0.001)

        store.gate = until_quarantined
        with anyio.fail_after(10), pytest.raises(ActorQuarantinedError) as info:
            await system.ref(Fickle, "f").ask(Ask("x"), message_id="m1")
    assert isinstance(info.value.__cause__, NonDeterminismError)
    assert seen and seen[0] != "quarantined"  # the lookup really raced the quarantine


async def test_ctx_now_random_uuid_are_replayed_from_the_log(make_store: StoreFactory) -> None:
    seen: list[tuple[datetime.datetime, float, uuid.UUID]] = []

    @attrs.define
    class S:
        n: int = 0

    class Clock(Actor[S]):
        snapshot_every = None

        async def receive(self, ctx: Context, msg: Ask) -> None:
            seen.append((ctx.now(), ctx.random(), ctx.uuid()))

    async with running(make_store, Clock) as system:
        ref = await system.spawn(Clock, "c")
        await ref.ask(Ask("x"))
    async with running(make_store, Clock) as system:
        await system.spawn(Clock, "c")
    assert len(seen) == 2 and seen[0] == seen[1]
    assert seen[0][0].tzinfo is not None


async def test_ctx_send_delivers_exactly_once_and_ctx_spawn_is_recorded(
    make_store: StoreFactory,
) -> None:
    class Parent(Actor[Notes]):
        snapshot_every = None

        async def receive(self, ctx: Context, msg: Ask) -> str:
            child = await ctx.spawn(Researcher, "child")
            await ctx.send(child, Add(3))
            return "sent"

    async with running(make_store, Parent, Researcher) as system:
        ref = await system.spawn(Parent, "p")
        assert await ref.ask(Ask("go")) == "sent"
        child = system.ref(Researcher, "child")
        assert await child.ask(Add(0)) == "3"
    async with running(make_store, Parent, Researcher) as system:
        await system.spawn(Parent, "p")  # replays the parent's step: no second delivery
        child = await system.spawn(Researcher, "child")
        assert await child.ask(Add(0)) == "3"


# -- snapshots --------------------------------------------------------------------------------


async def test_snapshots_follow_the_policy_and_keep_k(make_store: StoreFactory) -> None:
    async with running(make_store) as system:
        ref = await system.spawn(Researcher, "r", snapshot_every=2, snapshot_keep=2)
        for i in range(7):
            await ref.ask(Add(i))
    store = make_store()
    await store.open()
    snaps = await store.list_snapshots("r")
    if not isinstance(store, MemoryStore):
        await store.close()
    assert len(snaps) == 2
    assert snaps[0].seq > snaps[1].seq
    async with running(make_store) as system:
        ref = await system.spawn(Researcher, "r")
        assert await ref.ask(Add(0)) == str(sum(range(7)))


async def test_bad_snapshot_options_fail_at_spawn(make_store: StoreFactory) -> None:
    async with running(make_store) as system:
        with pytest.raises(ConfigurationError, match="snapshot_keep"):
            await system.spawn(Researcher, "r", snapshot_keep=1)
        with pytest.raises(ConfigurationError, match="snapshot_every"):
            await system.spawn(Researcher, "r", snapshot_every=0)


async def test_recovery_falls_back_from_a_corrupt_snapshot() -> None:
    store = MemoryStore()
    async with ActorSystem(store, actors=[Researcher]) as system:
        ref = await system.spawn(Researcher, "r", snapshot_every=2, snapshot_keep=3)
        for i in range(6):
            await ref.ask(Add(i))
    await store.open()
    newest = (await store.list_snapshots("r"))[0]
    store.replace_snapshot("r", newest.seq, b'{"answers":[],"total":999}')
    async with ActorSystem(store, actors=[Researcher]) as system:
        ref = await system.spawn(Researcher, "r")
        assert await ref.ask(Add(0)) == "15"
        cell = system._cells["r"]
        assert cell.last_recovery is not None
        assert cell.last_recovery["snapshots_rejected"] == [(newest.seq, "digest mismatch")]
    # all snapshots corrupt: replay from seq 1
    await store.open()
    for info in await store.list_snapshots("r"):
        store.replace_snapshot("r", info.seq, b"garbage")
    async with ActorSystem(store, actors=[Researcher]) as system:
        ref = await system.spawn(Researcher, "r")
        assert await ref.ask(Add(0)) == "15"


# -- corruption and conflicts -----------------------------------------------------------------


async def test_corrupt_entry_quarantines_that_actor_only() -> None:
    store = MemoryStore()
    async with ActorSystem(store, actors=[Researcher]) as system:
        await (await system.spawn(Researcher, "bad")).ask(Ask("x"))
        await (await system.spawn(Researcher, "good")).ask(Add(1))
    await store.open()
    row = (await store.read("bad"))[2]
    flipped = bytes([row.payload[0] ^ 0x01]) + row.payload[1:]
    store.replace_row(
        "bad",
        row.seq,
        type(row)(
            row.actor_id,
            row.seq,
            row.kind,
            row.type_tag,
            row.ref,
            row.message_id,
            flipped,
            row.checksum,
        ),
    )
    async with ActorSystem(store, actors=[Researcher]) as system:
        with pytest.raises(ActorQuarantinedError) as info:
            await system.spawn(Researcher, "bad")
        cause = info.value.__cause__
        assert isinstance(cause, CorruptEntryError)
        assert (cause.actor_id, cause.seq, cause.check) == ("bad", row.seq, "checksum")
        with pytest.raises(ActorQuarantinedError):
            await system.ref(Researcher, "bad").ask(Add(1))
        assert await (await system.spawn(Researcher, "good")).ask(Add(1)) == "2"
    # nothing was cut or rewritten
    await store.open()
    assert (await store.read("bad"))[2].payload == flipped


# -- bad input --------------------------------------------------------------------------------


async def test_unencodable_message_fails_at_the_call_and_writes_nothing(
    make_store: StoreFactory,
) -> None:
    @attrs.define
    class Weird:
        thing: Any

    async with running(make_store) as system:
        ref = await system.spawn(Researcher, "r")
        with pytest.raises(EncodeError):
            await ref.send(Weird(object()))
        with pytest.raises(EncodeError, match="not an instance of an attrs class"):
            await ref.send({"plain": "dict"})
        assert await ref.ask(Add(1)) == "1"
    assert await kinds(make_store, "r") == ["message", "step"]


async def test_invalid_actor_ids_are_rejected(make_store: StoreFactory) -> None:
    async with running(make_store) as system:
        for bad in ["", "x" * 201, "a\nb", 42]:
            with pytest.raises(ConfigurationError):
                await system.spawn(Researcher, bad)  # type: ignore[arg-type]  # testing bad input


async def test_closed_system_refuses_calls(make_store: StoreFactory) -> None:
    system = ActorSystem(make_store(), actors=[Researcher])
    with pytest.raises(ActorStoppedError):
        await system.spawn(Researcher, "r")
    async with system:
        ref = await system.spawn(Researcher, "r")
    with pytest.raises(ActorStoppedError):
        await ref.ask(Add(1))


async def test_unregistered_class_at_recovery_is_quarantined_until_spawned(
    make_store: StoreFactory,
) -> None:
    await crash_mid_tool(make_store, "slow_read", "read:1")
    async with running(make_store, Researcher) as system:
        assert system.status("b") == "quarantined"
        assert "not registered" in str(system.error("b"))
        ref = await system.spawn(Blocker, "b")
        assert await ref.ask(Ask("x"), message_id="m1") == "read:read:1"


async def test_spawning_an_existing_id_with_another_class_fails(make_store: StoreFactory) -> None:
    async with running(make_store, Researcher, Blocker) as system:
        await system.spawn(Researcher, "r")
    async with running(make_store, Researcher, Blocker) as system:
        with pytest.raises(ConfigurationError, match="exists with class"):
            await system.spawn(Blocker, "r")


async def test_idempotency_key_is_stable_and_documented() -> None:
    """[F13] the documented formats: with the log's incarnation id, and without (old logs)."""
    assert idempotency_key("run-42", 7, 2, incarnation="0f1e2d3c4b5a6978") == (
        "run-42:0f1e2d3c4b5a6978:7:2"
    )
    assert idempotency_key("run-42", 7, 2) == "run-42:7:2"


async def test_many_concurrent_actors_all_get_answers(make_store: StoreFactory) -> None:
    async with running(make_store) as system:
        refs = [await system.spawn(Researcher, f"a{i}") for i in range(30)]
        results: dict[int, str] = {}

        async def one(i: int) -> None:
            results[i] = await refs[i].ask(Ask(str(i)))

        async with anyio.create_task_group() as tg:
            for i in range(30):
                tg.start_soon(one, i)
    assert results == {i: f"found:{i}" for i in range(30)}


async def test_concurrent_spawns_start_each_actor_once(make_store: StoreFactory) -> None:
    """Spawns of different actors run concurrently (their registrations may share a commit);
    concurrent spawns of one id still start one cell, and a class clash still fails."""
    async with running(make_store, Researcher, Blocker) as system:
        spawned: list[Any] = []

        async def spawn(i: int) -> None:
            spawned.append(await system.spawn(Researcher, f"c{i % 20}"))

        async with anyio.create_task_group() as tg:
            for i in range(60):  # every id three times at once
                tg.start_soon(spawn, i)
        assert len(spawned) == 60
        assert system.active_actors == 20
        cells = {id(system._cells[f"c{i}"]) for i in range(20)}
        assert len(cells) == 20
        assert await system.ref(Researcher, "c7").ask(Ask("x")) == "found:x"
        with pytest.raises(ConfigurationError, match="running as"):
            await system.spawn(Blocker, "c7")
    async with running(make_store, Researcher) as system:
        rows = await system.store.list_actors()
        assert sorted(r.actor_id for r in rows) == sorted(f"c{i}" for i in range(20))


def _unused(_: Notes, __: Ask) -> None:  # keep imports honest for type checkers
    pass
