"""A message id names one message (issue 29 item 2): a reused ``message_id`` that comes with a
different message raises ``MessageIdReusedError`` naming the id, on ``ask``, ``send`` and
``ctx.send``, while the first is in flight and after it is handled, before and after a
restart; nothing is written. The same message again behaves as before: the recorded reply.

The PostgreSQL inbox (client mode) is covered in ``tests/cluster/test_inbox.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import attrs
import pytest
from actorlog import (
    Actor,
    ActorlogError,
    ActorSystem,
    ConfigurationError,
    Context,
    MessageIdReusedError,
    ToolCallError,
    errors,
)
from actorlog._durability import seenids as seenids_module
from actorlog.store import Store

from ..runtime.agents import Add, Ask, Researcher

pytestmark = pytest.mark.anyio

StoreFactory = Callable[[], Store]


@pytest.fixture(autouse=True, params=["filter", "store"])
def lookup(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Ids checked through the message-id filter (default) or in the store every time."""
    if request.param == "store":
        monkeypatch.setattr(seenids_module, "SEEN_IDS_LIMIT", 0)
    return str(request.param)


async def _last_seq(system: ActorSystem, actor_id: str) -> int:
    row = await system.store.get_actor(actor_id)
    assert row is not None
    return row.last_seq


def test_the_error_is_public_and_a_configuration_error() -> None:
    import actorlog

    assert actorlog.MessageIdReusedError is errors.MessageIdReusedError
    assert "MessageIdReusedError" in errors.__all__
    assert issubclass(MessageIdReusedError, ConfigurationError)
    assert MessageIdReusedError.__module__ == "actorlog"


async def test_ask_with_a_used_id_and_another_message_is_refused(
    make_store: StoreFactory,
) -> None:
    async with ActorSystem(make_store(), actors=[Researcher]) as system:
        ref = await system.spawn(Researcher, "r")
        assert await ref.ask(Add(2), message_id="q-1") == "2"
        before = await _last_seq(system, "r")
        with pytest.raises(MessageIdReusedError) as info:
            await ref.ask(Add(40), message_id="q-1")  # other field values
        err = info.value
        assert (err.actor_id, err.message_id, err.seq) == ("r", "q-1", 1)
        assert err.recorded_type == err.given_type
        assert "'q-1'" in str(err) and "seq 1" in str(err)
        with pytest.raises(MessageIdReusedError) as info:
            await ref.ask(Ask("something completely different"), message_id="q-1")
        assert info.value.recorded_type != info.value.given_type  # another type
        assert await _last_seq(system, "r") == before  # nothing written
        # the same message again: the recorded reply, as before
        assert await ref.ask(Add(2), message_id="q-1") == "2"
        assert await ref.ask(Add(1)) == "3"  # the refused ones were never handled


async def test_send_with_a_used_id_and_another_message_is_refused(
    make_store: StoreFactory,
) -> None:
    async with ActorSystem(make_store(), actors=[Researcher]) as system:
        ref = await system.spawn(Researcher, "r")
        await ref.send(Add(5), message_id="s-1")
        await ref.send(Add(5), message_id="s-1")  # a retry: accepted, not logged again
        with pytest.raises(MessageIdReusedError):
            await ref.send(Add(6), message_id="s-1")
        assert await ref.ask(Add(0)) == "5"


async def test_a_reuse_is_refused_after_a_restart(make_store: StoreFactory) -> None:
    """The recorded message comes from the store, not from memory."""
    async with ActorSystem(make_store(), actors=[Researcher]) as system:
        ref = await system.spawn(Researcher, "r")
        assert await ref.ask(Add(2), message_id="q-1") == "2"
    async with ActorSystem(make_store(), actors=[Researcher]) as system:
        ref = await system.spawn(Researcher, "r")
        with pytest.raises(MessageIdReusedError):
            await ref.ask(Add(3), message_id="q-1")
        assert await ref.ask(Add(2), message_id="q-1") == "2"
        assert await ref.ask(Add(0)) == "2"


@attrs.define
class Hold:
    n: int


@attrs.define
class Holder:
    seen: list[int] = attrs.Factory(list)


GATE: list[anyio.Event] = []


class Waiter(Actor[Holder]):
    snapshot_every = None

    async def receive(self, ctx: Context, msg: Hold) -> int:
        await GATE[0].wait()
        self.state.seen.append(msg.n)
        return msg.n


async def test_a_reuse_is_refused_while_the_first_is_in_flight(make_store: StoreFactory) -> None:
    GATE[:] = [anyio.Event()]
    async with ActorSystem(make_store(), actors=[Waiter]) as system:
        ref = await system.spawn(Waiter, "w")
        got: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def first() -> None:
                got.append(await ref.ask(Hold(1), message_id="h"))

            async def same() -> None:
                got.append(await ref.ask(Hold(1), message_id="h"))

            tg.start_soon(first)
            with anyio.fail_after(5):
                while not system._cells["w"].inflight_ids:
                    await anyio.sleep(0.005)
            with pytest.raises(MessageIdReusedError) as info:
                await ref.ask(Hold(2), message_id="h")
            assert info.value.message_id == "h"
            with pytest.raises(MessageIdReusedError):
                await ref.send(Hold(3), message_id="h")
            tg.start_soon(same)  # the same message joins the first one's reply
            await anyio.sleep(0.05)
            GATE[0].set()
        assert got == [1, 1]
        assert await ref.ask(Hold(9)) == 9
        state = system._cells["w"].actor.state
        assert state.seen == [1, 9]


async def test_an_int_for_a_float_field_is_the_same_message(make_store: StoreFactory) -> None:
    """Compared in canonical form: what the message class makes equal is equal."""
    async with ActorSystem(make_store(), actors=[Floats]) as system:
        ref = await system.spawn(Floats, "f")
        assert await ref.ask(Price(2), message_id="p") == 2.0
        assert await ref.ask(Price(2.0), message_id="p") == 2.0
        with pytest.raises(MessageIdReusedError):
            await ref.ask(Price(2.5), message_id="p")


@attrs.define
class Price:
    amount: float


class Floats(Actor[Holder]):
    snapshot_every = None

    async def receive(self, ctx: Context, msg: Price) -> float:
        return float(msg.amount)


# -- ctx.send: a replayed send that now carries another message --------------------------


@attrs.define
class Relay:
    pass


@attrs.define
class Note:
    text: str


BODY = ["first"]
SENT: list[str] = []


class Inbox(Actor[Holder]):
    snapshot_every = None

    async def receive(self, ctx: Context, msg: Note) -> None:
        SENT.append(msg.text)


class Sender(Actor[Holder]):
    snapshot_every = None

    async def receive(self, ctx: Context, msg: Relay) -> str:
        target = await ctx.spawn(Inbox, "inbox")
        try:
            await ctx.send(target, Note(BODY[0]))
        except ToolCallError as exc:
            return f"refused: {exc.error_type}"
        await GATE[0].wait()  # the first run stops here (the system closes under it)
        return "sent"


async def test_ctx_send_replayed_with_another_message_is_refused(make_store: StoreFactory) -> None:
    """The step is cut after its send was delivered; the handler, run again by recovery,
    sends another message under the same derived id: the delivery fails with
    ``MessageIdReusedError`` (a ``ToolCallError`` in the handler), nothing is delivered
    twice. (Before, the other message was silently taken for the delivered one.)"""
    GATE[:] = [anyio.Event()]
    BODY[:] = ["first"]
    SENT.clear()
    async with ActorSystem(make_store(), actors=[Sender, Inbox], shutdown_grace=0.1) as system:
        ref = await system.spawn(Sender, "s")
        await ref.send(Relay(), message_id="go")
        with anyio.fail_after(10):
            while SENT != ["first"]:
                await anyio.sleep(0.005)
    BODY[0] = "second"
    GATE[0].set()
    async with ActorSystem(make_store(), actors=[Sender, Inbox]) as system:
        ref = await system.spawn(Sender, "s")
        reply = await ref.ask(Relay(), message_id="go", timeout=10)
        assert reply == "refused: MessageIdReusedError", reply
        notes = await system.store.read("inbox", kinds=["message"])
        assert len(notes) == 1  # delivered once, the first message only


async def test_every_refusal_is_an_actorlog_error(make_store: StoreFactory) -> None:
    async with ActorSystem(make_store(), actors=[Researcher]) as system:
        ref = await system.spawn(Researcher, "r")
        await ref.ask(Add(1), message_id="x")
        with pytest.raises(ActorlogError):
            await ref.ask(Add(7), message_id="x")
