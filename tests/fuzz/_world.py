"""What the argument fuzz works with: the hostile values, the kinds of parameter (which of
those values a parameter must refuse), a store with a little history, a dump of every row of a
SQLite file, and the actor whose handler calls the ``Context`` methods with hostile values."""

from __future__ import annotations

import datetime
import math
import os
import sqlite3
from collections.abc import Callable
from typing import Any

import anyio
import attrs
from actorlog import Actor, ActorlogError, ActorSystem, Context, Retry, tool
from actorlog.stores import SqliteStore

UTC = datetime.UTC


def _deep(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = [value]
    return value


def _deep_dict(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = {"k": value}
    return value


@attrs.define
class Note:
    """A message of the fuzz actor."""

    text: str = ""


@attrs.define
class Try:
    """Ask the fuzz actor to call ``ctx.<method>`` with the hostile value ``value`` (a key of
    HOSTILE) for ``param``."""

    method: str
    param: str
    value: str


@attrs.define
class Book:
    notes: list[str] = attrs.Factory(list)


#: every hostile value, by name
HOSTILE: dict[str, Any] = {
    "inf": math.inf,
    "-inf": -math.inf,
    "nan": math.nan,
    "-0.0": -0.0,
    "huge": 10**100,
    "-huge": -(10**100),
    "3e11": 3e11,
    "1e300": 1e300,
    "-1": -1,
    "0": 0,
    "true": True,
    "false": False,
    "none": None,
    "dt_min": datetime.datetime.min,
    "dt_max": datetime.datetime.max,
    "dt_min_utc": datetime.datetime.min.replace(tzinfo=UTC),
    "dt_max_utc": datetime.datetime.max.replace(tzinfo=UTC),
    "naive": datetime.datetime(2030, 1, 1),
    "aware": datetime.datetime(2030, 1, 1, tzinfo=UTC),
    "td_max": datetime.timedelta.max,
    "td_min": datetime.timedelta.min,
    "td_neg": datetime.timedelta(seconds=-1),
    "empty": "",
    "big": "x" * 100_000,
    "nul": "a\x00b",
    "surrogate": "bad \udcff",
    "deep": _deep(2000),
    "deep_dict": _deep_dict(2000),
    "object": object(),
    "class": Note,  # a class where an instance is expected
    "instance": Note("an instance where a class is expected"),
    "bytes": b"bytes",
    "list": ["a"],
    "set": {"a", "b"},
    "exc_instance": ValueError("an exception instance"),
    "exc_class": ValueError,
}

#: what each kind of parameter accepts; any other hostile value must be refused (an
#: ActorlogError). ``any``: whatever the value, a typed error or success.
_FALSY = {"-0.0", "0", "false", "empty", "none"}
ACCEPTS: dict[str, set[str]] = {
    "any": set(HOSTILE),
    # a delay or period, seconds or a timedelta: one that ends within datetime's range
    "seconds": {"-0.0", "-1", "0", "td_neg"},
    "seconds_or_none": {"-0.0", "-1", "0", "td_neg", "none"},
    # a finite number (a duration that is not added to a date: a timeout, an interval)
    "float": {"-0.0", "3e11", "1e300", "-1", "0", "huge", "-huge"},
    "float_or_none": {"-0.0", "3e11", "1e300", "-1", "0", "huge", "-huge", "none"},
    "int": {"-1", "0", "huge", "-huge"},
    "int_or_none": {"-1", "0", "huge", "-huge", "none"},
    # a flag: Python's truthiness is the convention, so any value is a flag; what is
    # checked is that nothing but a typed error comes out
    "bool": set(HOSTILE),
    "datetime": {"naive", "aware"},
    "datetime_or_none": {"naive", "aware", "none"},
    "text": {"empty", "big"},  # a reason, a who: free text (NUL and surrogates refused)
    "text_or_none": {"empty", "big", "none"},
    "id": {"big"},  # an actor id, a name: non-empty text
    "id_or_none": {"big", "none"},
    # a task path of a step ([F18]): "" (the handler's own task) or numbers joined by "."
    "task_path": {"empty"},
    # a list of names: an empty value (falsy) is no names; a list or set of names
    "names": _FALSY | {"list", "set", "deep_dict"},
    "class": {"class", "exc_class"},
    "class_or_none": {"class", "exc_class", "none"},
    "callable_or_none": {"class", "exc_class", "none"},
    "none": {"none"},
}


def must_refuse(kind: str, value: str) -> bool:
    """Must a parameter of ``kind`` refuse the hostile value ``value``?"""
    return value not in ACCEPTS[kind]


def dump(path: str) -> list[tuple[str, list[tuple[Any, ...]]]]:
    """Every row of every table of the SQLite file (read-only), in a stable order."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [
            r[0]
            for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            )
        ]
        out = []
        for t in tables:
            rows = con.execute(f'SELECT * FROM "{t}"').fetchall()  # our own names
            out.append((t, sorted(rows, key=repr)))
        return out
    finally:
        con.close()


def diff(before: list[Any], after: list[Any]) -> str:
    """What changed between two dumps (empty when nothing did)."""
    changes = []
    b, a = dict(before), dict(after)
    for table in sorted(set(b) | set(a)):
        gone = [r for r in b.get(table, []) if r not in a.get(table, [])]
        new = [r for r in a.get(table, []) if r not in b.get(table, [])]
        if gone or new:
            changes.append(f"{table}: {len(new)} new rows, {len(gone)} removed: {new[:2]!r}"[:400])
    return "; ".join(changes)


@tool(effect="read")
async def lookup(text: str) -> str:
    return f"found {text}"


@tool(effect="write", idempotent=True, retry=Retry(attempts=2, initial=0.0))
async def record(text: str, *, idempotency_key: str) -> str:
    return f"recorded {text}"


@tool(effect="write", name="fuzz.transfer")
async def transfer(text: str) -> str:
    await anyio.sleep_forever()  # cancelled by the handler's deadline while it runs
    return text


class Loser(Actor[Book], name="fuzz.loser"):
    """Gives up on a write under a deadline: the write waits for a ruling (issue 25). Not a
    ``fuzz.fuzzer``: the operator tools' restart does not wait its deadlines again."""

    snapshot_every = None

    async def receive(self, ctx: Context, msg: Note) -> str:
        with anyio.move_on_after(0.2):
            await ctx.call(transfer, msg.text)
        return "went on"


#: the outcome of each ctx call the handler made: (method, param, value) -> outcome
CTX_OUTCOMES: dict[tuple[str, str, str], str] = {}


class Fuzzer(Actor[Book], name="fuzz.fuzzer"):
    """Takes ``Note`` (a step with a tool call) and ``Try`` (a ctx call, hostile)."""

    snapshot_every = None  # no background writes (the fuzz compares the rows after a call)

    async def receive(self, ctx: Context, msg: Note | Try) -> str:
        if isinstance(msg, Note):
            found = await ctx.call(lookup, msg.text)
            self.state.notes.append(found)
            return found
        value = HOSTILE[msg.value]
        key = (msg.method, msg.param, msg.value)
        outcome = "accepted"
        try:
            with anyio.move_on_after(0.3) as scope:
                await CTX_CALLS[msg.method](ctx, msg.param, value)
            if scope.cancelled_caught:
                outcome = "accepted (blocked)"
        except ActorlogError as exc:
            outcome = f"refused {type(exc).__name__}"
        except Exception as exc:  # what the fuzz is looking for: recorded, not raised
            outcome = f"UNTYPED {type(exc).__name__}: {str(exc)[:200]}"
        CTX_OUTCOMES.setdefault(key, outcome)
        self.state.notes.append(f"{msg.method}.{msg.param}")
        return outcome


def _ref(ctx: Context) -> Any:
    return ctx_ref[0]


#: the ref a ctx call sends to (set by the test)
ctx_ref: list[Any] = []


def _args(param: str, value: Any, base: dict[str, Any]) -> dict[str, Any]:
    return {**base, param: value}


async def _sleep(ctx: Context, param: str, value: Any) -> None:
    await ctx.sleep(value)


async def _sleep_until(ctx: Context, param: str, value: Any) -> None:
    await ctx.sleep_until(value)


async def _send_later(ctx: Context, param: str, value: Any) -> None:
    base: dict[str, Any] = {"delay": 3600.0} if param != "at" else {}
    if param in ("delay", "at"):
        await ctx.send_later(_ref(ctx), Note("later"), **_args(param, value, base))
    elif param == "msg":
        await ctx.send_later(_ref(ctx), value, delay=3600.0)
    else:  # ref
        await ctx.send_later(value, Note("later"), delay=3600.0)


async def _spawn(ctx: Context, param: str, value: Any) -> None:
    if param == "cls":
        await ctx.spawn(value, "fuzz-child")
    elif param == "actor_id":
        await ctx.spawn(Fuzzer, value)
    else:
        await ctx.spawn(Fuzzer, "fuzz-child", **{param: value})


async def _version(ctx: Context, param: str, value: Any) -> None:
    if param == "change_id":
        ctx.version(value)
    else:
        ctx.version("fuzz-change", **{param: value})


async def _patched(ctx: Context, param: str, value: Any) -> None:
    ctx.patched(value)


async def _call(ctx: Context, param: str, value: Any) -> None:
    if param == "tool":
        await ctx.call(value, "x")
    else:
        await ctx.call(lookup, value)


async def _send(ctx: Context, param: str, value: Any) -> None:
    if param == "ref":
        await ctx.send(value, Note("x"))
    else:
        await ctx.send(_ref(ctx), value)


async def _emit(ctx: Context, param: str, value: Any) -> None:
    ctx.emit(value)


async def _stop(ctx: Context, param: str, value: Any) -> None:
    raise AssertionError("ctx.stop is fuzzed on its own actor")


CTX_CALLS: dict[str, Callable[[Context, str, Any], Any]] = {
    "sleep": _sleep,
    "sleep_until": _sleep_until,
    "send_later": _send_later,
    "spawn": _spawn,
    "version": _version,
    "patched": _patched,
    "call": _call,
    "send": _send,
    "emit": _emit,
}

#: every ctx parameter fuzzed, with its kind
CTX_PARAMS: dict[tuple[str, str], str] = {
    ("sleep", "seconds"): "seconds",
    ("sleep_until", "when"): "datetime",
    ("send_later", "delay"): "seconds",
    ("send_later", "at"): "datetime",
    ("send_later", "msg"): "any",
    ("send_later", "ref"): "none",
    ("spawn", "cls"): "none",
    ("spawn", "actor_id"): "id",
    ("spawn", "snapshot_every"): "int_or_none",
    ("spawn", "snapshot_every_seconds"): "float_or_none",
    ("spawn", "snapshot_keep"): "int",
    ("spawn", "recovery_budget"): "float_or_none",
    ("spawn", "retention"): "any",
    ("version", "change_id"): "id",
    ("version", "default"): "int",
    ("version", "max"): "int",
    ("patched", "change_id"): "id",
    ("call", "tool"): "none",
    ("call", "text"): "any",
    ("send", "ref"): "none",
    ("send", "msg"): "any",
    ("emit", "obj"): "any",
}


async def build_store(path: str) -> None:
    """A store with a little of everything: two actors with steps and snapshots, a timer."""
    async with ActorSystem(SqliteStore(path), actors=[Fuzzer], shutdown_grace=0) as system:
        for aid in ("alpha", "beta"):
            ref = await system.spawn(Fuzzer, aid, snapshot_every=2)
            for n in range(3):
                await ref.ask(Note(f"{aid}-{n}"), message_id=f"{aid}-m{n}")
        await system.send_later(system.ref(Fuzzer, "beta"), Note("timer"), delay=3600.0)


def fresh_copy(template: str, directory: str, name: str = "agents.db") -> str:
    """A copy of the template store (a backup: consistent, no -wal file left)."""
    target = os.path.join(directory, name)
    src, dst = sqlite3.connect(template), sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    return target
