"""Bad input: a clear error at the call that caused it, nothing written, nothing lost.

DESIGN.md section 8. Each test feeds one kind of bad input, checks the error type and that
its message says what is wrong, checks the store holds exactly what it held before, and
checks the actor (or the system) still works afterwards.
"""

from __future__ import annotations

import hashlib
import math
import sqlite3
import threading
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest
from actorlog import (
    Actor,
    ActorStoppedError,
    ActorSystem,
    ConfigurationError,
    Context,
    EncodeError,
    HandlerError,
    StoreURLError,
    ToolCallError,
    UnsupportedFormatError,
    tool,
)
from actorlog._journal.codec import MAX_ACTOR_ID_CHARS, MAX_PAYLOAD_BYTES
from actorlog.store import FORMAT_VERSION
from actorlog.stores import SqliteStore, open_store

from .conftest import StoreFactory
from .helpers import TOOLS, Add, Counter, contents

pytestmark = pytest.mark.anyio


@attrs.define
class Say:
    text: str


@attrs.define
class Holder:
    value: Any = None


@attrs.define
class Other:
    pass


class NotAttrs:
    def __init__(self) -> None:
        self.text = "hi"


@tool(effect="read", name="bad_input.echo")
async def echo(text: str, times: int = 1) -> str:
    TOOLS.calls.append(("echo", text))
    return text * times


@tool(effect="read", name="bad_input.huge")
async def huge(n: int) -> str:
    TOOLS.calls.append(("huge", n))
    return "x" * n


@attrs.define
class Notes:
    said: list[str] = attrs.Factory(list)
    extra: Any = None


class Chat(Actor[Notes]):
    """Does whatever the message asks, so tests can provoke each kind of bad input."""

    __actorlog_tag__ = "torture.Chat"
    snapshot_every = 2

    async def receive(self, ctx: Context, msg: Say | Holder) -> Any:
        if isinstance(msg, Holder):
            return msg.value
        cmd, _, arg = msg.text.partition(":")
        if cmd == "say":
            self.state.said.append(arg)
            return arg
        if cmd == "echo":
            return await ctx.call(echo, arg)
        if cmd == "huge-result":
            try:
                return len(await ctx.call(huge, int(arg)))
            except ToolCallError as exc:
                self.state.said.append("tool failed")
                return f"tool failed: {exc.error_type}"
        if cmd == "huge-args":
            try:
                await ctx.call(echo, "y" * int(arg))
            except EncodeError:
                return "rejected"
        if cmd == "object-arg":
            try:
                await ctx.call(echo, {"when": object()})
            except EncodeError as exc:
                return str(exc)
        if cmd == "huge-reply":
            return "z" * int(arg)
        if cmd == "object-reply":
            return threading.Lock()
        if cmd == "bad-call":
            if arg == "missing":
                return await ctx.call(echo)
            if arg == "extra":
                return await ctx.call(echo, "a", 2, 3)
            if arg == "keyword":
                return await ctx.call(echo, "a", nope=1)
            return await ctx.call(echo, "a", idempotency_key="mine")
        if cmd == "spawn-bad-id":
            await ctx.spawn(Chat, arg or "")
        if cmd == "state-object":
            self.state.extra = threading.Lock()
            return "poisoned"
        if cmd == "state-clean":
            self.state.extra = None
            return "clean"
        if cmd == "raise":
            raise KeyError(arg)
        if cmd == "state":
            return list(self.state.said)
        return None


async def _ask_all(system: ActorSystem, *texts: str) -> list[Any]:
    ref = await system.spawn(Chat, "chat")
    return [await ref.ask(Say(t)) for t in texts]


# -- messages --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("msg", "fragment"),
    [
        (NotAttrs(), "not an instance of an attrs class"),
        ({"text": "a dict"}, "not an instance of an attrs class"),
        (Holder(object()), "Holder"),
        (Holder(threading.Lock()), "Holder"),
        (Holder(math.nan), "Holder"),
        (Holder(math.inf), "Holder"),
        (Holder([1, {2, 3}, object()]), "Holder"),
        (Say("x" * (MAX_PAYLOAD_BYTES + 1)), "exceeds"),
    ],
    ids=["plain-object", "dict", "object", "lock", "nan", "inf", "nested", "oversized"],
)
async def test_unencodable_message_is_rejected_and_nothing_written(
    make_store: StoreFactory, msg: Any, fragment: str
) -> None:
    async with ActorSystem(make_store(), actors=[Chat]) as system:
        ref = await system.spawn(Chat, "chat")
        assert await ref.ask(Say("say:before"), message_id="m1") == "before"
        before = await contents(system.store)
        with pytest.raises(EncodeError, match="cannot encode") as info:
            await ref.send(msg, message_id="bad")
        assert fragment in str(info.value)
        with pytest.raises(EncodeError):
            await ref.ask(msg, message_id="bad")
        assert await contents(system.store) == before
        # the bad message id was not consumed and the actor still works
        assert await ref.ask(Say("say:after"), message_id="bad") == "after"
    async with ActorSystem(make_store(), actors=[Chat]) as system:
        ref = await system.spawn(Chat, "chat")
        assert await ref.ask(Say("say:before"), message_id="m1") == "before"  # recorded reply


async def test_oversized_message_limit_is_the_documented_one(make_store: StoreFactory) -> None:
    """[F10] MAX_PAYLOAD_BYTES bounds an entry's encoded payload; well under it passes."""
    async with ActorSystem(make_store(), actors=[Chat]) as system:
        ref = await system.spawn(Chat, "chat")
        big = "b" * (MAX_PAYLOAD_BYTES - 4096)
        assert await ref.ask(Say("say:" + big)) == big
        with pytest.raises(EncodeError, match=str(MAX_PAYLOAD_BYTES)):
            await ref.send(Say("say:" + "b" * MAX_PAYLOAD_BYTES))


async def test_message_type_the_actor_does_not_accept_is_a_recorded_handler_error(
    make_store: StoreFactory,
) -> None:
    async with ActorSystem(make_store(), actors=[Chat]) as system:
        ref = await system.spawn(Chat, "chat")
        with pytest.raises(HandlerError, match="does not accept messages of type") as info:
            await ref.ask(Other(), message_id="o1")
        assert info.value.error_type == "TypeError"
        assert await ref.ask(Say("say:still here")) == "still here"
        with pytest.raises(HandlerError, match="does not accept"):
            await ref.ask(Other(), message_id="o1")  # recorded: not handled again


async def test_message_of_a_type_no_longer_known_is_dead_lettered_on_recovery(
    make_store: StoreFactory,
) -> None:
    """A logged message whose class is gone after a redeploy: its step records a clear
    error naming the type, the messages after it are handled, nothing is dropped silently."""
    store = make_store()
    gone = attrs.define(
        type(
            "Vanished",
            (),
            {"__annotations__": {"text": "str"}, "__actorlog_tag__": "torture.gone.Vanished"},
        )
    )

    blocking = [True]

    class Loose(Actor[Notes]):
        __actorlog_tag__ = "torture.Loose"

        async def receive(self, ctx: Context, msg: Any) -> Any:
            self.state.said.append(str(getattr(msg, "text", msg)))
            if getattr(msg, "text", "") == "block" and blocking[0]:
                await anyio.sleep_forever()
            return len(self.state.said)

    async with ActorSystem(store, actors=[Loose], shutdown_grace=0.1) as system:
        ref = await system.spawn(Loose, "loose")
        await ref.send(Say("block"), message_id="b")  # keeps the next two pending
        await ref.send(gone(text="from the old code"), message_id="v")
        await ref.send(Say("after"), message_id="a")
    blocking[0] = False
    async with ActorSystem(store, actors=[Loose], shutdown_grace=0.1) as system:
        ref = await system.spawn(Loose, "loose")
        with pytest.raises(HandlerError, match=r"unknown message type 'torture\.gone\.Vanished'"):
            await ref.ask(gone(text="from the old code"), message_id="v")
        assert await ref.ask(Say("after"), message_id="a") == 2  # "block" then "after"


# -- tools -----------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["missing", "extra", "keyword", "idempotency_key"])
async def test_wrong_tool_call_fails_in_the_handler_and_logs_nothing(
    make_store: StoreFactory, how: str
) -> None:
    async with ActorSystem(make_store(), actors=[Chat]) as system:
        ref = await system.spawn(Chat, "chat")
        TOOLS.calls.clear()
        with pytest.raises(HandlerError, match=r"bad call of tool 'bad_input\.echo'") as info:
            await ref.ask(Say(f"bad-call:{how}"))
        assert info.value.error_type == "ConfigurationError"
        (rows, _) = (await contents(system.store))["chat"]
        assert [r.kind for r in rows] == ["message", "step"]  # no intent, no result
        assert TOOLS.calls == []
        assert await ref.ask(Say("echo:ok")) == "ok"


def test_bad_tool_declarations_fail_at_decoration() -> None:
    def sync(x: int) -> int:
        return x

    async def no_key(x: int) -> int:
        return x

    async def positional_key(x: int, idempotency_key: str, /) -> int:
        return x

    with pytest.raises(ConfigurationError, match="async function"):
        tool(sync)  # type: ignore[arg-type]  # the point: a sync function is refused
    with pytest.raises(ConfigurationError, match="idempotency_key"):
        tool(effect="write", idempotent=True)(no_key)
    with pytest.raises(ConfigurationError, match="idempotency_key"):
        tool(effect="write", idempotent=True)(positional_key)
    with pytest.raises(ConfigurationError, match="effect must be"):
        tool(effect="delete")(no_key)  # type: ignore[call-overload]  # the point: bad literal
    with pytest.raises(ConfigurationError, match="reconcile"):
        tool(effect="write", reconcile="yes")(no_key)  # type: ignore[call-overload]  # bad type


async def test_oversized_tool_arguments_are_rejected_before_the_intent(
    make_store: StoreFactory,
) -> None:
    async with ActorSystem(make_store(), actors=[Chat]) as system:
        ref = await system.spawn(Chat, "chat")
        TOOLS.calls.clear()
        assert await ref.ask(Say(f"huge-args:{MAX_PAYLOAD_BYTES + 1}")) == "rejected"
        (rows, _) = (await contents(system.store))["chat"]
        assert "intent" not in [r.kind for r in rows]
        assert TOOLS.calls == []


async def test_unencodable_tool_arguments_are_rejected_before_the_intent(
    make_store: StoreFactory,
) -> None:
    async with ActorSystem(make_store(), actors=[Chat]) as system:
        ref = await system.spawn(Chat, "chat")
        TOOLS.calls.clear()
        error = await ref.ask(Say("object-arg:"))
        assert "cannot encode arguments of tool" in error and "echo" in error, error
        (rows, _) = (await contents(system.store))["chat"]
        assert "intent" not in [r.kind for r in rows]
        assert TOOLS.calls == []
        assert await ref.ask(Say("say:still here")) == "still here"


async def test_oversized_tool_result_is_a_recorded_tool_error_and_never_reruns(
    make_store: StoreFactory,
) -> None:
    """The tool ran; its result is too large to log. The call must settle as a recorded
    ToolCallError, so replaying the completed step does not run the tool again."""
    TOOLS.calls.clear()
    n = MAX_PAYLOAD_BYTES + 10
    async with ActorSystem(make_store(), actors=[Chat]) as system:
        ref = await system.spawn(Chat, "chat", snapshot_every=None)
        reply = await ref.ask(Say(f"huge-result:{n}"), message_id="h")
        assert reply == "tool failed: EncodeError"
        assert await ref.ask(Say("say:next")) == "next"
    assert TOOLS.count("huge") == 1
    async with ActorSystem(make_store(), actors=[Chat]) as system:
        ref = await system.spawn(Chat, "chat", snapshot_every=None)
        assert await ref.ask(Say(f"huge-result:{n}"), message_id="h") == "tool failed: EncodeError"
        assert await ref.ask(Say("say:again")) == "again"
        assert await ref.ask(Say("state:")) == ["tool failed", "next", "again"]
    assert TOOLS.count("huge") == 1  # the replay served the recorded error


@pytest.mark.parametrize("what", ["huge-reply", "object-reply"])
async def test_unloggable_reply_is_a_recorded_handler_error(
    make_store: StoreFactory, what: str
) -> None:
    """A reply the log cannot hold (unencodable, or over the size limit) fails that ask
    with HandlerError; the actor goes on, and a restart does not redo the step."""
    arg = str(MAX_PAYLOAD_BYTES + 10)
    async with ActorSystem(make_store(), actors=[Chat]) as system:
        ref = await system.spawn(Chat, "chat")
        with pytest.raises(HandlerError, match="cannot encode"):
            await ref.ask(Say(f"{what}:{arg}"), message_id="r")
        assert system.status("chat") in ("idle", "running")
        assert await ref.ask(Say("say:fine")) == "fine"
    async with ActorSystem(make_store(), actors=[Chat]) as system:
        ref = await system.spawn(Chat, "chat")
        with pytest.raises(HandlerError, match="cannot encode"):
            await ref.ask(Say(f"{what}:{arg}"), message_id="r")
        assert await ref.ask(Say("say:later")) == "later"
        assert await ref.ask(Say("state:")) == ["fine", "later"]


# -- state -----------------------------------------------------------------------------------


@attrs.define
class LockedState:
    lock: Any = attrs.Factory(threading.Lock)


class Locked(Actor[LockedState]):
    __actorlog_tag__ = "torture.Locked"

    async def receive(self, ctx: Context, msg: Say) -> str:
        return msg.text


async def test_state_type_that_cannot_be_encoded_fails_spawn_and_writes_nothing(
    make_store: StoreFactory,
) -> None:
    async with ActorSystem(make_store(), actors=[Locked, Chat]) as system:
        with pytest.raises(EncodeError, match="LockedState"):
            await system.spawn(Locked, "locked")
        assert await system.store.list_actors() == []
        assert system.status("locked") in ("unknown", "stopped")
        chat = await system.spawn(Chat, "chat")
        assert await chat.ask(Say("say:others fine")) == "others fine"


async def test_state_that_becomes_unencodable_fails_only_its_snapshots(
    make_store: StoreFactory,
) -> None:
    """Snapshots never block correctness: the failed snapshot is reported, the log holds
    everything, and recovery rebuilds the same state."""
    async with ActorSystem(make_store(), actors=[Chat]) as system:
        ref = await system.spawn(Chat, "chat")  # snapshot_every = 2
        assert await ref.ask(Say("state-object:")) == "poisoned"
        for i in range(4):
            await ref.ask(Say(f"say:{i}"))
        assert await system.store.list_snapshots("chat") == []
        await anyio.sleep(0.05)  # operator events are written in the background
        kinds = [e.kind for e in await system.store.read_events("chat")]
        assert "snapshot_failed" in kinds
        assert await ref.ask(Say("state-clean:")) == "clean"
        await ref.ask(Say("say:4"))
        assert await system.store.list_snapshots("chat") != []
    async with ActorSystem(make_store(), actors=[Chat]) as system:
        ref = await system.spawn(Chat, "chat")
        assert await ref.ask(Say("state:")) == ["0", "1", "2", "3", "4"]


# -- actor ids -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "actor_id",
    ["", "x" * (MAX_ACTOR_ID_CHARS + 1), "x" * 100_000, "a\nb", "a\x00b", "tab\t", "\x7f", "\x9b"],
    ids=["empty", "limit+1", "huge", "newline", "nul", "tab", "del", "c1-control"],
)
async def test_invalid_actor_id_is_rejected_everywhere_and_writes_nothing(
    make_store: StoreFactory, actor_id: str
) -> None:
    async with ActorSystem(make_store(), actors=[Chat]) as system:
        with pytest.raises(ConfigurationError, match="actor id"):
            await system.spawn(Chat, actor_id)
        with pytest.raises(ConfigurationError, match="actor id"):
            system.ref(Chat, actor_id)
        chat = await system.spawn(Chat, "chat")
        before = await contents(system.store)
        with pytest.raises(HandlerError, match="actor id"):
            await chat.ask(Say(f"spawn-bad-id:{actor_id}"))
        after = await contents(system.store)
        assert list(after) == ["chat"]
        assert [r.kind for r in after["chat"][0][len(before["chat"][0]) :]] == ["message", "step"]


@pytest.mark.parametrize("actor_id", [None, 42, b"bytes"], ids=["none", "int", "bytes"])
async def test_non_string_actor_id_is_rejected(make_store: StoreFactory, actor_id: Any) -> None:
    async with ActorSystem(make_store(), actors=[Chat]) as system:
        with pytest.raises(ConfigurationError, match="must be a str"):
            await system.spawn(Chat, actor_id)
        assert await system.store.list_actors() == []


async def test_valid_unusual_actor_ids_work(make_store: StoreFactory) -> None:
    ids = ["x" * MAX_ACTOR_ID_CHARS, "агент-1", "エージェント", "a b/c:d", "🙂", "'; DROP TABLE--"]
    async with ActorSystem(make_store(), actors=[Chat]) as system:
        for actor_id in ids:
            ref = await system.spawn(Chat, actor_id)
            assert await ref.ask(Say(f"say:{actor_id}"), message_id="m") == actor_id
    async with ActorSystem(make_store(), actors=[Chat]) as system:
        for actor_id in ids:
            ref = await system.spawn(Chat, actor_id)
            assert await ref.ask(Say(f"say:{actor_id}"), message_id="m") == actor_id


# -- handlers --------------------------------------------------------------------------------


async def test_handler_that_raises_is_recorded_and_the_actor_goes_on(
    make_store: StoreFactory,
) -> None:
    async with ActorSystem(make_store(), actors=[Chat]) as system:
        ref = await system.spawn(Chat, "chat")
        with pytest.raises(HandlerError, match="KeyError") as info:
            await ref.ask(Say("raise:boom"), message_id="e")
        assert info.value.error_type == "KeyError"
        assert isinstance(info.value.__cause__, KeyError)
        assert await ref.ask(Say("say:next")) == "next"
        with pytest.raises(HandlerError, match="KeyError"):
            await ref.ask(Say("raise:boom"), message_id="e")
    async with ActorSystem(make_store(), actors=[Chat]) as system:
        ref = await system.spawn(Chat, "chat")
        with pytest.raises(HandlerError, match="KeyError"):
            await ref.ask(Say("raise:boom"), message_id="e")
        assert await ref.ask(Say("state:")) == ["next"]


@attrs.define
class Wait:
    release: bool = False


BLOCKS = {"count": 0}


class Sleeper(Actor[Notes]):
    __actorlog_tag__ = "torture.Sleeper"

    async def receive(self, ctx: Context, msg: Wait | Say) -> Any:
        if isinstance(msg, Say):
            await ctx.call(echo, msg.text)
            self.state.said.append(msg.text)
            if BLOCKS["count"] == 0:
                BLOCKS["count"] += 1
                await anyio.sleep_forever()
            return msg.text
        return len(self.state.said)


async def test_handler_that_blocks_times_out_the_asker_and_resumes_after_restart(
    make_store: StoreFactory,
) -> None:
    BLOCKS["count"] = 0
    TOOLS.calls.clear()
    async with ActorSystem(make_store(), actors=[Sleeper, Chat], shutdown_grace=0.2) as system:
        sleeper = await system.spawn(Sleeper, "sleeper")
        with pytest.raises(TimeoutError):
            await sleeper.ask(Say("stuck"), message_id="s", timeout=0.2)
        chat = await system.spawn(Chat, "chat")
        assert await chat.ask(Say("say:unaffected")) == "unaffected"
    async with ActorSystem(make_store(), actors=[Sleeper]) as system:
        sleeper = await system.spawn(Sleeper, "sleeper")
        assert await sleeper.ask(Say("stuck"), message_id="s", timeout=5) == "stuck"
        assert await sleeper.ask(Wait()) == 1
    assert TOOLS.count("echo", "stuck") == 1  # the resumed step took the tool's result from the log


# -- stores ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "",
        "agents.db",
        "nope://x",
        "sqlite://host/agents.db",
        "sqlite:///",
        "sqlite:///agents.db?durability=yolo",
        "postgresql://",
        "://",
        "http://[::1",
    ],
)
async def test_store_url_that_does_not_parse_fails_clearly_and_creates_nothing(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreURLError, match="cannot open store URL") as info:
        open_store(url)
    assert "expected sqlite:///" in str(info.value)
    with pytest.raises(StoreURLError):
        ActorSystem(url, actors=[Chat])
    assert list(tmp_path.iterdir()) == []


def _files_digest(path: Path) -> tuple[str, int]:
    """The database file's digest and the size of its write-ahead log (0 if none)."""
    wal = path.with_name(path.name + "-wal")
    return hashlib.sha256(path.read_bytes()).hexdigest(), wal.stat().st_size if wal.exists() else 0


async def test_store_written_by_a_newer_format_is_refused_unchanged(tmp_path: Path) -> None:
    db = tmp_path / "agents.db"
    async with ActorSystem(SqliteStore(db), actors=[Counter]) as system:
        ref = await system.spawn(Counter, "c")
        for i in range(5):
            await ref.ask(Add(i), message_id=f"m{i}")
        await ref.send(Add(99), message_id="pending")
    con = sqlite3.connect(db)
    con.execute(
        "UPDATE actorlog_meta SET value = ? WHERE key = 'format_version'",
        (str(FORMAT_VERSION + 1),),
    )
    con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    before = _files_digest(db)
    for read_only in (False, True):
        with pytest.raises(UnsupportedFormatError, match="upgrade actorlog") as info:
            async with ActorSystem(SqliteStore(db, read_only=read_only), actors=[Counter]):
                pass
        assert (info.value.found, info.value.supported) == (FORMAT_VERSION + 1, FORMAT_VERSION)
    assert _files_digest(db) == before  # nothing written, not even to the -wal file
    con = sqlite3.connect(db)
    con.execute(
        "UPDATE actorlog_meta SET value = '1' WHERE key = 'format_version'"
    )  # format 1: resumes too
    con.commit()
    con.close()
    async with ActorSystem(SqliteStore(db), actors=[Counter]) as system:
        ref = await system.spawn(Counter, "c")
        assert await ref.ask(Add(99), message_id="pending") == sum(
            i * 10 for i in (0, 1, 2, 3, 4, 99)
        )


async def test_closed_system_refuses_work(make_store: StoreFactory) -> None:
    system = ActorSystem(make_store(), actors=[Chat])
    with pytest.raises(ActorStoppedError, match="not running"):
        await system.spawn(Chat, "chat")
    async with system:
        ref = await system.spawn(Chat, "chat")
        assert await ref.ask(Say("say:x")) == "x"
    with pytest.raises(ActorStoppedError):
        await ref.send(Say("say:late"))
    with pytest.raises(ActorStoppedError):
        await system.spawn(Chat, "chat")
    with pytest.raises(ActorStoppedError):
        async with system:
            pass
