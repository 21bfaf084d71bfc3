"""More message types (issue 15): standard dataclasses and pydantic models travel like attrs
classes (encode, decode, live equals replay); anything else is refused at the call."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import anyio
import attrs
import pydantic
import pytest
from actorlog import Actor, ActorSystem, ConfigurationError, Context, EncodeError, message

from tests.conftest import StoreFactory

pytestmark = pytest.mark.anyio


@dataclasses.dataclass
class Where:
    city: str
    zip_codes: list[int] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class AskDC:
    question: str
    where: Where
    at: datetime.datetime


class AskPD(pydantic.BaseModel):
    question: str
    tags: tuple[str, ...] = ()
    at: datetime.datetime
    score: float | None = None


@message(name="ask-pd-named")
class NamedPD(pydantic.BaseModel):
    text: str


@attrs.define
class Seen:
    items: list[str] = attrs.Factory(list)


SEEN: dict[str, list[str]] = {"live": [], "replay": []}
GOT: dict[str, Any] = {}
PHASE = {"now": "live"}


class Probe(Actor[Seen]):
    snapshot_every = None  # the restart replays every step

    async def receive(self, ctx: Context, msg: AskDC | AskPD | NamedPD) -> str:
        SEEN[PHASE["now"]].append(repr(msg))
        GOT[PHASE["now"]] = msg
        self.state.items.append(type(msg).__name__)
        return repr(msg)


WHEN = datetime.datetime(2024, 5, 1, 12, 30, tzinfo=datetime.UTC)


@pytest.mark.parametrize(
    "msg",
    [
        AskDC("weather?", Where("Oslo", [150, 151]), WHEN),
        AskPD(question="news?", tags=("a", "b"), at=WHEN, score=0.5),
        NamedPD(text="named"),
    ],
    ids=["dataclass", "pydantic", "pydantic-named"],
)
async def test_dataclass_and_pydantic_messages_are_the_same_live_and_on_replay(
    make_store: StoreFactory, msg: Any
) -> None:
    SEEN["live"].clear()
    SEEN["replay"].clear()
    PHASE["now"] = "live"
    async with ActorSystem(make_store(), actors=[Probe]) as system:
        ref = await system.spawn(Probe, "p")
        with anyio.fail_after(10):
            reply = await ref.ask(msg, message_id="m1")
    # the handler got the decoded form of what was logged: an equal value, not the caller's
    assert type(GOT["live"]) is type(msg) and GOT["live"] == msg and GOT["live"] is not msg
    PHASE["now"] = "replay"
    async with ActorSystem(make_store(), actors=[Probe]) as system:
        ref = await system.spawn(Probe, "p")
        with anyio.fail_after(10):
            assert await ref.ask(msg, message_id="m1") == reply  # the recorded reply
    assert SEEN["replay"] == SEEN["live"] == [reply]
    assert GOT["replay"] == msg


async def test_a_pydantic_message_that_fails_validation_on_decode_names_its_type(
    make_store: StoreFactory,
) -> None:
    """A model whose logged form does not validate back (a validator that rejects what the
    handler would receive) fails that step with the decode error, not an internal one."""

    class Strict(pydantic.BaseModel):
        n: int

        @pydantic.field_validator("n")
        @classmethod
        def small(cls, v: int) -> int:
            if v > 10:
                raise ValueError("too big")
            return v

    class Taker(Actor[Seen]):
        async def receive(self, ctx: Context, msg: Strict) -> int:
            return msg.n

    async with ActorSystem(make_store(), actors=[Taker], messages=[Strict]) as system:
        ref = await system.spawn(Taker, "t")
        assert await ref.ask(Strict(n=3)) == 3
        with pytest.raises(Exception, match="cannot decode message of type") as err:
            await ref.ask(Strict.model_construct(n=99))
    assert "too big" in str(err.value)


@pytest.mark.parametrize(
    "bad",
    [{"question": "x"}, "a string", ("a", "tuple"), Where],
    ids=["dict", "str", "tuple", "a class"],
)
async def test_a_value_that_cannot_be_a_message_is_refused_at_the_call(
    make_store: StoreFactory, bad: Any
) -> None:
    async with ActorSystem(make_store(), actors=[Probe]) as system:
        ref = await system.spawn(Probe, "p")
        with pytest.raises(EncodeError) as err:
            await ref.send(bad)
        assert await system.store.read("p") == []  # nothing was written
    text = str(err.value)
    assert "not an instance of an attrs class, a dataclass or a pydantic model" in text
    assert "@attrs.define" in text


@pytest.mark.parametrize("how", ["send", "ask"])
async def test_a_refused_message_starts_and_stores_nothing(
    make_store: StoreFactory, how: str
) -> None:
    """A message is checked at the door (``ref.send``/``ask``), before the actor is
    started: an actor never spawned is not registered in the store by a refused call."""
    async with ActorSystem(make_store(), actors=[Probe]) as system:
        ref = system.ref(Probe, "never-started")
        with pytest.raises(EncodeError):
            await getattr(ref, how)({"question": "x"})
        assert system.status("never-started") == "unknown"  # no cell was started
        assert await system.store.get_actor("never-started") is None
        assert await system.store.read("never-started") == []


def test_message_decorates_dataclasses_and_pydantic_models() -> None:
    @message(name="dc-note")
    @dataclasses.dataclass
    class DCNote:
        text: str

    from actorlog._journal import names as _names

    assert _names.type_tag(DCNote) == "dc-note"
    assert _names.type_tag(NamedPD) == "ask-pd-named"
    with pytest.raises(ConfigurationError, match="decorates a class"):
        message(name="x")(3)  # type: ignore[type-var]  # wrong on purpose
