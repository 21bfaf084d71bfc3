"""A race's losers are recorded (issue 25, "losers and timeouts are recorded"), found by the
concurrency model (tests/model/concurrent_machine.py).

Three or more contestants start at once and the first to return cancels the others. On
a SQLite file or PostgreSQL (a commit that yields to the event loop) the third contestant
is cancelled while its intent is being committed (it waits for the flush the second
contestant's intent started, ``Context.call`` before ``ToolCalls._run`` registers the call
as open): the step completes with that intent unsettled, with no result and no decision
(``ops.history`` shows it ``auto``), so the "completed step holds no unsettled intent"
promise is broken, and a recovery has to settle it by its policy. On ``MemoryStore`` it
passes.

The sibling: a ``ctx.send`` cancelled by the handler's own scope after its effect was
logged (during its commit, or before the delivery) is never delivered, though the completed
step's log says it was sent (and no recovery delivers it again).
"""

from __future__ import annotations

import anyio
import anyio.lowlevel
import attrs
import pytest
from actorlog import Actor, ActorSystem, Context, ops, tool

from tests.conftest import StoreFactory

pytestmark = pytest.mark.anyio


@tool(effect="read", name="race_losers.quote")
async def quote(who: int) -> int:
    await anyio.lowlevel.checkpoint()
    return who


@attrs.define
class Race:
    contestants: int


@attrs.define
class Nothing:
    pass


class Racer(Actor[Nothing]):
    name = "race_losers.Racer"

    async def receive(self, ctx: Context, msg: Race) -> int:
        won: list[int] = []

        async def contestant(i: int) -> None:
            got = await ctx.call(quote, i)
            if not won:
                won.append(got)
                tg.cancel_scope.cancel()

        async with anyio.create_task_group() as tg:
            for i in range(msg.contestants):
                tg.start_soon(contestant, i)
        return won[0]


@pytest.mark.parametrize("contestants", [2, 3, 5])
async def test_every_loser_of_a_race_is_settled_in_the_log(
    make_store: StoreFactory, contestants: int
) -> None:
    async with ActorSystem(make_store(), actors=[Racer]) as system:
        ref = await system.spawn(Racer, "racer")
        for n in range(3):
            winner = await ref.ask(Race(contestants), message_id=f"race-{n}")
            h = await ops.history(system.store, "racer")
            step = h.steps[-1]
            assert step.status == "ok"
            calls = [(c.args[0], c.status, c.settled_by) for c in step.calls]
            assert len(calls) == contestants, calls
            unsettled = [c for c in calls if c[1] not in ("ok", "error")]
            assert not unsettled, f"race {n} (won by {winner}): unsettled losers {calls}"
            (won,) = [c for c in step.calls if c.args[0] == winner]
            assert won.status == "ok"
            # the winner's value was logged before any other contestant's
            ok = [c for c in step.calls if c.status == "ok"]
            assert min(ok, key=lambda c: c.result_seq or 0) is won, calls


# -- a sibling: a send the handler's own scope cancelled after it was logged ----------------


@attrs.define
class Note:
    i: int


@attrs.define
class Notes:
    got: list[int] = attrs.Factory(list)


class Receiver(Actor[Notes]):
    name = "race_losers.Receiver"

    async def receive(self, ctx: Context, msg: Note) -> None:
        self.state.got.append(msg.i)


class Sender(Actor[Nothing]):
    """One task makes a call and cancels the group; three others ``ctx.send`` meanwhile."""

    name = "race_losers.Sender"

    async def receive(self, ctx: Context, msg: Race) -> str:
        to = await ctx.spawn(Receiver, "receiver")

        async def first() -> None:
            await ctx.call(quote, 0)
            tg.cancel_scope.cancel()

        async def send(i: int) -> None:
            await ctx.send(to, Note(i))

        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            for i in range(1, msg.contestants):
                tg.start_soon(send, i)
        return "done"


async def test_a_logged_send_is_delivered_even_if_the_handler_cancelled_it(
    make_store: StoreFactory,
) -> None:
    """A ``ctx.send`` whose effect is in the log of a completed step was sent: the receiver
    gets it (recovery never delivers it again: the step is complete). Found next to the
    race losers: on SQLite 11 of 15 logged sends were never delivered."""
    async with ActorSystem(make_store(), actors=[Sender, Receiver]) as system:
        ref = await system.spawn(Sender, "sender")
        for n in range(3):
            await ref.ask(Race(4), message_id=f"go-{n}")
        h = await ops.history(system.store, "sender")
        logged = sorted(
            e.value["message_id"] for s in h.steps for e in s.effects if e.name == "send"
        )
        delivered: list[str] = []
        with anyio.move_on_after(10):
            while delivered != logged:  # a delivered send is a logged message of the receiver
                rows = await system.store.read("receiver", kinds=["message"])
                delivered = sorted(str(r.message_id) for r in rows)
                await anyio.sleep(0.05)
    missing = sorted(set(logged) - set(delivered))
    assert not missing, f"{len(missing)} of {len(logged)} logged sends never delivered: {missing}"
