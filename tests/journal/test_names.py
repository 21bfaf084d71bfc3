"""Names that last (issue 15): ``name=`` / ``aliases=`` on actors and messages, the warning
for ``__main__.`` tags, and the class-mismatch error that quotes the fix."""

from __future__ import annotations

import warnings
from typing import Any

import anyio
import attrs
import pytest
from actorlog import (
    Actor,
    ActorRef,
    ActorSystem,
    ConfigurationError,
    Context,
    UnstableNameWarning,
    message,
)
from actorlog.stores import MemoryStore

from tests.conftest import StoreFactory

pytestmark = pytest.mark.anyio


@attrs.define
class Notes:
    items: list[str] = attrs.Factory(list)


# -- the code of "yesterday": tags recorded under names that no longer exist -------------


@attrs.define
class OldNote:
    __actorlog_tag__ = "legacy.app.Note"
    text: str


class OldKeeper(Actor[Notes]):
    __actorlog_tag__ = "legacy.app.Keeper"
    snapshot_every = None  # every restart replays from seq 1: old messages are decoded

    async def receive(self, ctx: Context, msg: OldNote) -> int:
        self.state.items.append(msg.text)
        return len(self.state.items)


# -- the code of "today": the same classes, renamed, with stable names --------------------


@message(name="note", aliases=["legacy.app.Note"])
@attrs.define
class Note:
    text: str


class Keeper(Actor[Notes], name="keeper", aliases=["legacy.app.Keeper"]):
    snapshot_every = None

    async def receive(self, ctx: Context, msg: Note) -> int:
        self.state.items.append(msg.text)
        return len(self.state.items)


async def test_a_named_actor_and_message_are_recorded_under_their_names(
    make_store: StoreFactory,
) -> None:
    async with ActorSystem(make_store(), actors=[Keeper]) as system:
        ref = await system.spawn(Keeper, "k")
        assert await ref.ask(Note("a")) == 1
        row = await system.store.get_actor("k")
        entries = await system.store.read("k")
    assert row is not None and row.actor_type == "keeper"
    assert [e.type_tag for e in entries if e.kind == "message"] == ["note"]


async def test_a_renamed_actor_and_message_read_the_log_of_their_old_names(
    make_store: StoreFactory,
) -> None:
    """A ``name=`` change is a migration: an actor created under the old tag spawns with the
    new class (alias), and its logged messages decode into the new message class."""
    async with ActorSystem(make_store(), actors=[OldKeeper]) as system:
        old = await system.spawn(OldKeeper, "k")
        assert await old.ask(OldNote("first")) == 1
        assert await old.ask(OldNote("second")) == 2
    async with ActorSystem(make_store(), actors=[Keeper]) as system:
        ref = await system.spawn(Keeper, "k")  # recorded as legacy.app.Keeper
        with anyio.fail_after(10):
            assert await ref.ask(Note("third")) == 3  # the two old steps were replayed


async def test_recovery_on_start_finds_an_actor_recorded_under_an_alias(
    make_store: StoreFactory,
) -> None:
    async with ActorSystem(make_store(), actors=[OldKeeper]) as system:
        await (await system.spawn(OldKeeper, "k")).ask(OldNote("first"))
    async with ActorSystem(make_store(), actors=[Keeper]) as system:
        assert system.registry.actor_class("legacy.app.Keeper") is Keeper
        with anyio.fail_after(10):
            assert await system.ref(Keeper, "k").ask(Note("second")) == 2


async def test_without_the_alias_the_old_actor_is_refused_with_the_fix_quoted(
    make_store: StoreFactory,
) -> None:
    class Renamed(Actor[Notes], name="renamed-keeper"):
        async def receive(self, ctx: Context, msg: Note) -> None:
            pass

    async with ActorSystem(make_store(), actors=[OldKeeper]) as system:
        await (await system.spawn(OldKeeper, "k")).ask(OldNote("first"))
    async with ActorSystem(make_store(), actors=[Renamed], recover_on_start=False) as system:
        with pytest.raises(ConfigurationError) as err:
            await system.spawn(Renamed, "k")
    text = str(err.value)
    assert "exists with class legacy.app.Keeper, not renamed-keeper" in text
    # the class's declared name, not one made from its Python name (issue 24, item 16)
    assert 'class Renamed(Actor[...], name="renamed-keeper", aliases=["legacy.app.Keeper"])' in text
    assert "another actor id" in text


async def test_the_fix_quoted_keeps_the_declared_name_and_aliases(
    make_store: StoreFactory,
) -> None:
    class Scholar(Actor[Notes], name="researcher", aliases=["older.Researcher"]):
        async def receive(self, ctx: Context, msg: Note) -> None:
            pass

    async with ActorSystem(make_store(), actors=[OldKeeper]) as system:
        await (await system.spawn(OldKeeper, "k")).ask(OldNote("first"))
    async with ActorSystem(make_store(), actors=[Scholar], recover_on_start=False) as system:
        with pytest.raises(ConfigurationError) as err:
            await system.spawn(Scholar, "k")
    text = str(err.value)
    assert 'name="scholar"' not in text
    assert (
        'class Scholar(Actor[...], name="researcher", '
        'aliases=["older.Researcher", "legacy.app.Keeper"])'
    ) in text


async def test_the_main_module_mismatch_error_says_to_declare_an_alias(
    make_store: StoreFactory,
) -> None:
    class Script(Actor[Notes]):
        __actorlog_tag__ = "__main__.Script"

        async def receive(self, ctx: Context, msg: Note) -> None:
            pass

    class Imported(Actor[Notes]):
        async def receive(self, ctx: Context, msg: Note) -> None:
            pass

    with pytest.warns(UnstableNameWarning):
        async with ActorSystem(make_store(), actors=[Script]) as system:
            await system.spawn(Script, "s")
    async with ActorSystem(make_store(), actors=[Imported], recover_on_start=False) as system:
        with pytest.raises(ConfigurationError) as err:
            await system.spawn(Imported, "s")
    text = str(err.value)
    assert "exists with class __main__.Script, not" in text
    assert 'name="imported", aliases=["__main__.Script"]' in text


def test_a_class_defined_in_main_warns_once_with_the_fix() -> None:
    class Scripted(Actor[Notes]):
        __module__ = "__main__"

        async def receive(self, ctx: Context, msg: Any) -> None:
            pass

    with pytest.warns(UnstableNameWarning, match=r'name="scripted"') as caught:
        ActorSystem(MemoryStore(), actors=[Scripted])
    assert f"'__main__.{Scripted.__qualname__}'" in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ActorSystem(MemoryStore(), actors=[Scripted])  # once per class, not every time


def test_a_named_class_in_main_does_not_warn() -> None:
    class Scripted(Actor[Notes], name="scripted"):
        __module__ = "__main__"

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ActorSystem(MemoryStore(), actors=[Scripted])


def test_a_subclass_of_a_named_actor_is_not_that_actor() -> None:
    class Sub(Keeper):
        pass

    system = ActorSystem(MemoryStore(), actors=[Keeper, Sub])
    assert system.registry.actor_class("keeper") is Keeper
    assert system.registry.actor_class(f"{__name__}.{Sub.__qualname__}") is Sub


def test_a_name_belongs_to_one_class() -> None:
    with pytest.raises(ConfigurationError, match="already declared by"):

        @message(name="note")
        @attrs.define
        class Other:
            text: str


@pytest.mark.parametrize(
    ("name", "aliases", "match"),
    [
        ("__main__.X", None, "starts with '__main__.'"),
        ("", None, "non-empty"),
        ("ok-name", "legacy.X", "a list of names"),
        ("ok-name", [3], "non-empty str"),
    ],
)
def test_bad_names_are_refused_at_the_class(name: str, aliases: Any, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):

        class Bad(Actor[Notes], name=name, aliases=aliases):
            pass


def test_message_refuses_a_class_that_cannot_be_a_message() -> None:
    with pytest.raises(ConfigurationError, match="not an attrs class, a dataclass"):

        @message(name="plain")
        class Plain:
            pass


@message(name="shout")
@attrs.define
class Shout:
    text: str


class Echo(Actor[Notes], name="echo"):
    async def receive(self, ctx: Context, msg: Any) -> str:
        return str(msg.text)


async def test_a_named_message_decodes_without_registration(make_store: StoreFactory) -> None:
    """``receive`` takes Any and no ``messages=[...]``: the declared name finds the class."""
    store = make_store()
    async with ActorSystem(store, actors=[Echo]) as system:
        ref = await system.spawn(Echo, "e")
        assert await ref.ask(Shout("hi")) == "hi"


@attrs.define
class OldPing:
    __actorlog_tag__ = "legacy.app.Ping"
    n: int


@message(name="ping", aliases=["legacy.app.Ping"])
@attrs.define
class Ping:
    n: int


@attrs.define
class Go:
    n: int


TARGET: dict[str, ActorRef[Echo]] = {}


class OldSender(Actor[Notes]):
    __actorlog_tag__ = "legacy.app.Sender"
    snapshot_every = None

    async def receive(self, ctx: Context, msg: Go) -> None:
        await ctx.send(TARGET["ref"], OldPing(msg.n))


class Sender(Actor[Notes], name="sender", aliases=["legacy.app.Sender"]):
    snapshot_every = None

    async def receive(self, ctx: Context, msg: Go) -> None:
        await ctx.send(TARGET["ref"], Ping(msg.n))
        self.state.items.append(str(msg.n))


async def test_a_recorded_send_of_a_renamed_message_replays(make_store: StoreFactory) -> None:
    """``ctx.send`` records the message's tag; replay under the new name matches the alias
    instead of failing with NonDeterminismError."""
    async with ActorSystem(make_store(), actors=[OldSender, Echo]) as system:
        TARGET["ref"] = await system.spawn(Echo, "target")
        await (await system.spawn(OldSender, "s")).ask(Go(1))
    async with ActorSystem(make_store(), actors=[Sender, Echo]) as system:
        TARGET["ref"] = system.ref(Echo, "target")
        ref = await system.spawn(Sender, "s")  # replays the recorded send of legacy.app.Ping
        with anyio.fail_after(10):
            await ref.ask(Go(2))
        assert system._cells["s"].actor.state.items == ["1", "2"]  # step 1 replayed
