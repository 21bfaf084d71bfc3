"""Read-only queries (issue 29 item 3): ``ref.query`` runs between steps on a copy of the
live state, logs nothing, and refuses effects and state changes; ``system.read_state``
reads the last durable state of an actor that is not loaded, running no tool."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import anyio
import anyio.lowlevel
import pytest
from actorlog import (
    ActorSystem,
    ConfigurationError,
    HandlerError,
    ReadOnlyQueryError,
)
from actorlog.store import Store

from .query_agents import (
    GATES,
    RUNS,
    SELF_REFS,
    STARTED,
    Add,
    Hold,
    Items,
    Keeper,
    Last,
    PeekOther,
    Plain,
    Slow,
    Stop,
    Tamper,
)

pytestmark = pytest.mark.anyio

StoreFactory = Callable[[], Store]


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    for d in (RUNS, GATES, STARTED, SELF_REFS):
        d.clear()
    yield
    for d in (RUNS, GATES, STARTED, SELF_REFS):
        d.clear()


async def _last_seq(system: ActorSystem, actor_id: str) -> int:
    row = await system.store.get_actor(actor_id)
    assert row is not None
    return row.last_seq


async def test_a_query_reads_the_live_state_and_logs_nothing(make_store: StoreFactory) -> None:
    async with ActorSystem(make_store(), actors=[Keeper]) as system:
        ref = await system.spawn(Keeper, "k")
        await ref.ask(Add("a"))
        await ref.ask(Add("b"))
        seq = await _last_seq(system, "k")
        assert await ref.query(lambda s: list(s.items)) == ["A", "B"]
        assert await ref.query(Last(1)) == ["B"]  # a query message, answered by on_query

        async def count(s: Items) -> int:  # an async function works too
            return len(s.items)

        assert await ref.query(count) == 2
        assert await _last_seq(system, "k") == seq  # nothing logged
        got = await ref.query(lambda s: s.items)
        got.append("mine")  # the caller's copy: the actor's state is not touched
        assert await ref.query(lambda s: list(s.items)) == ["A", "B"]
    assert RUNS == ["a", "b"]


async def test_a_query_waits_for_the_running_step(make_store: StoreFactory) -> None:
    """Never interleaved with a step: a query made while a step is half done answers with
    the state after that step."""
    GATES["x"] = anyio.Event()
    answers: list[list[str]] = []
    async with ActorSystem(make_store(), actors=[Keeper]) as system:
        ref = await system.spawn(Keeper, "k")
        async with anyio.create_task_group() as tg:
            tg.start_soon(ref.ask, Slow("x", "y"))
            await STARTED.setdefault("x", anyio.Event()).wait()

            async def query() -> None:
                answers.append(await ref.query(lambda s: list(s.items)))

            tg.start_soon(query)
            for _ in range(50):  # give the query every chance to (wrongly) answer now
                await anyio.lowlevel.checkpoint()
            assert answers == []
            GATES["x"].set()
        assert answers == [["x", "y"]]


@pytest.mark.parametrize("how", ["append", "tool", "send"])
async def test_a_query_that_acts_or_changes_the_state_is_refused(
    make_store: StoreFactory, how: str
) -> None:
    async with ActorSystem(make_store(), actors=[Keeper]) as system:
        ref = await system.spawn(Keeper, "k")
        SELF_REFS["k"] = ref
        await ref.ask(Add("a"))
        seq = await _last_seq(system, "k")
        with pytest.raises(ReadOnlyQueryError, match="a query may only read the state"):
            await ref.query(Tamper(how))

        def mutate(s: Items) -> None:
            s.items.clear()

        with pytest.raises(ReadOnlyQueryError, match="changed the state"):
            await ref.query(mutate)
        assert await ref.query(lambda s: list(s.items)) == ["A"]  # unchanged
        assert await _last_seq(system, "k") == seq  # nothing logged
        assert await ref.ask(Add("b")) == 2  # the actor goes on
    assert RUNS == ["a", "b"]


async def test_bad_queries_get_clear_errors(make_store: StoreFactory) -> None:
    async with ActorSystem(make_store(), actors=[Keeper, Plain]) as system:
        ref = await system.spawn(Keeper, "k")
        plain = await system.spawn(Plain, "p")
        with pytest.raises(ConfigurationError, match="a query message"):
            await ref.query(42)
        with pytest.raises(ConfigurationError, match="declares no on_query"):
            await plain.query(Last(1))
        # a query message on_query is not annotated to take: refused before it runs
        with pytest.raises(ConfigurationError, match="does not accept queries of type Add"):
            await ref.query(Add("x"))
        with pytest.raises(ZeroDivisionError):  # the query's own error, as it raised it
            await plain.query(lambda s: 1 / 0)
        with pytest.raises(HandlerError, match="inside the handler"):
            await ref.ask(PeekOther("k2"))  # a handler may not query: not logged
        assert await plain.query(lambda s: s.items) == []


async def test_read_state_of_an_actor_that_is_not_loaded(make_store: StoreFactory) -> None:
    async with ActorSystem(make_store(), actors=[Keeper]) as system:
        ref = await system.spawn(Keeper, "k", snapshot_every=2)
        for item in "abc":
            await ref.ask(Add(item))  # a snapshot after b, c after it in the log
    async with ActorSystem(make_store(), actors=[Keeper]) as system:
        seq = await _last_seq(system, "k")
        state = await system.read_state(Keeper, "k")
        assert isinstance(state, Items) and state.items == ["A", "B", "C"]
        assert system.active_actors == 0  # not started
        assert await _last_seq(system, "k") == seq  # nothing written
        with pytest.raises(ConfigurationError, match="exists with class"):
            await system.read_state(Plain, "k")
        from actorlog import ActorNotFoundError

        with pytest.raises(ActorNotFoundError):
            await system.read_state(Keeper, "nobody")
    assert RUNS == ["a", "b", "c"]  # replayed from the log: no tool ran again


async def test_read_state_leaves_out_an_unfinished_step(make_store: StoreFactory) -> None:
    GATES["x"] = anyio.Event()
    async with ActorSystem(make_store(), actors=[Keeper], shutdown_grace=0) as system:
        ref = await system.spawn(Keeper, "k")
        await ref.ask(Add("a"))
        async with anyio.create_task_group() as tg:
            tg.start_soon(ref.send, Slow("x", "y"))
            await STARTED.setdefault("x", anyio.Event()).wait()
            assert (await system.read_state(Keeper, "k")).items == ["A"]  # x is half done
            tg.cancel_scope.cancel()


async def test_read_state_runs_no_tool_of_an_interrupted_step(make_store: StoreFactory) -> None:
    """A log whose last step was interrupted inside an idempotent write (in doubt): the
    durable state holds the completed step only, and the write is not re-run."""
    from tests.upgrading.agents import KEYS, Notes, Payer
    from tests.upgrading.test_incarnation_keys import _load_old_log

    KEYS.clear()
    await _load_old_log(make_store())
    async with ActorSystem(make_store(), actors=[]) as system:  # recovers nothing
        state = await system.read_state(Payer, "pay-1")
        assert isinstance(state, Notes) and state.answers == ["charged q1"]
        assert await _last_seq(system, "pay-1") == 6
    assert KEYS == []


async def test_a_finished_actor_is_still_queryable(make_store: StoreFactory) -> None:
    async with ActorSystem(make_store(), actors=[Keeper]) as system:
        ref = await system.spawn(Keeper, "k")
        await ref.ask(Add("a"))
        await ref.ask(Stop("done"))
        assert await ref.query(Last(5)) == ["A"]  # loaded, ended: its final state
    async with ActorSystem(make_store(), actors=[Keeper]) as system:
        assert await system.ref(Keeper, "k").query(Last(5)) == ["A"]  # after a restart


async def test_read_state_cuts_a_step_cancelled_live_where_its_log_ends(
    make_store: StoreFactory,
) -> None:
    """A step cancelled live (``system.cancel``) is replayed only as far as its log goes, as
    recovery replays it. Before, ``read_state`` did not cut it and never returned."""
    GATES["x"] = anyio.Event()
    async with ActorSystem(make_store(), actors=[Keeper]) as system:
        ref = await system.spawn(Keeper, "k")
        await ref.ask(Add("a"))
        async with anyio.create_task_group() as tg:
            tg.start_soon(ref.send, Hold("x"))
            await STARTED.setdefault("x", anyio.Event()).wait()  # inside the tool call
            assert await system.cancel("k")
        await ref.ask(Add("b"))  # the actor goes on after the cancelled step
        live = await ref.query(lambda s: list(s.items))
    assert live == ["A", "x", "B"]
    GATES["x"] = anyio.Event()  # never set: a tool run again would hang
    async with ActorSystem(make_store(), actors=[]) as system:
        with anyio.fail_after(30):
            state = await system.read_state(Keeper, "k")
    assert isinstance(state, Items) and state.items == live
    assert RUNS == ["a", "b"]


async def test_read_state_skips_a_message_refused_after_the_end(make_store: StoreFactory) -> None:
    from actorlog import ActorFinishedError

    async with ActorSystem(make_store(), actors=[Keeper]) as system:
        ref = await system.spawn(Keeper, "k")
        await ref.ask(Add("a"))
        await system.terminate("k")
        with pytest.raises(ActorFinishedError):
            await ref.ask(Add("b"))
    async with ActorSystem(make_store(), actors=[]) as system:
        state = await system.read_state(Keeper, "k")
    assert isinstance(state, Items) and state.items == ["A"]
    assert RUNS == ["a"]
