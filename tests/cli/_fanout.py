"""A hand-written log of a step whose tasks made calls at the same time (FORMAT.md [F18]),
written entry by entry into a real SQLite file through the store's own ``append``.

Step 1 (message seq 1), finished:
    seq 2  intent  lookup("q")      handler      result seq 3   (alone, before the fan-out)
    seq 4  intent  search("a")      task 0       result seq 8
    seq 5  intent  search("b")      task 1       result seq 7   (4 and 5 overlap)
    seq 6  effect  now              task 1
    seq 9  intent  summarize("a")   task 0       result seq 10  (alone: 4 and 5 are done)
    seq 11 step
Step 2 (message seq 12), unfinished: two calls of tasks 0 and 1.0 with no outcome (in doubt).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import attrs
from actorlog import Actor, Context, tool
from actorlog._journal import codec as _codec
from actorlog._journal.records import (
    EffectRecord,
    IntentRecord,
    MessageRecord,
    ResultRecord,
    StepRecord,
)
from actorlog.stores import SqliteStore

ACTOR = "fan-1"
#: 2026-01-02 03:04:05 UTC: when the first step's message was logged
T0 = 1_767_323_045.0


def _rows() -> list[tuple[str, str, int, str | None, dict[str, Any]]]:
    def intent(index: int, args: list[Any], at: float, task: str | None) -> dict[str, Any]:
        return IntentRecord(
            index, "read", "rerun", args, {}, f"{ACTOR}:1:{index}", at, task or ""
        ).payload()

    def result(value: Any, at: float, took: float) -> dict[str, Any]:
        return ResultRecord(True, value, duration=took, at=at).payload()

    return [
        ("message", "demo.Ask", 0, "m1", MessageRecord({"q": "q"}, at=T0).payload()),
        ("intent", "lookup", 1, None, intent(0, ["q"], T0 + 0.010, None)),
        ("result", "lookup", 2, None, result("ctx", T0 + 0.020, 0.010)),
        ("intent", "search", 1, None, intent(0, ["a"], T0 + 0.030, "0")),
        ("intent", "search", 1, None, intent(0, ["b"], T0 + 0.031, "1")),
        ("effect", "now", 1, None, EffectRecord(1, T0 + 0.032, T0 + 0.032, "1").payload()),
        ("result", "search", 5, None, result("B", T0 + 0.130, 0.099)),
        ("result", "search", 4, None, result("A", T0 + 0.135, 0.105)),
        ("intent", "summarize", 1, None, intent(1, ["a"], T0 + 0.140, "0")),
        ("result", "summarize", 9, None, result("S", T0 + 0.250, 0.110)),
        ("step", "demo.Ask", 1, None, StepRecord(True, "S", duration=0.25, at=T0 + 0.25).payload()),
        ("message", "demo.Ask", 0, "m2", MessageRecord({"q": "r"}, at=T0 + 1).payload()),
        ("intent", "search", 12, None, intent(0, ["c"], T0 + 1.010, "0")),
        ("intent", "search", 12, None, intent(0, ["d"], T0 + 1.011, "1.0")),
    ]


def write_fanout_log(db: Path) -> None:
    """Write the log above into a new SQLite store at ``db``."""
    write_log(db, ACTOR, _rows())


def wide_rows(width: int) -> list[tuple[str, str, int, str | None, dict[str, Any]]]:
    """One finished step whose ``width`` tasks each made one call, all at the same time:
    intents at seqs 2..width+1, then their results."""
    rows: list[tuple[str, str, int, str | None, dict[str, Any]]] = [
        ("message", "demo.Ask", 0, "m1", MessageRecord({"q": "wide"}, at=T0).payload()),
    ]
    for i in range(width):
        key = f"wide-1:1:{i}.0"
        payload = IntentRecord(0, "read", "rerun", [i], {}, key, T0 + 0.01, str(i)).payload()
        rows.append(("intent", "search", 1, None, payload))
    for i in range(width):
        rows.append(("result", "search", 2 + i, None, ResultRecord(True, i, at=T0 + 1).payload()))
    step = StepRecord(True, "done", duration=1.0, at=T0 + 1).payload()
    return [*rows, ("step", "demo.Ask", 1, None, step)]


def write_log(
    db: Path, actor: str, entries: list[tuple[str, str, int, str | None, dict[str, Any]]]
) -> None:
    """Append ``entries`` (kind, type tag, ref, message id, payload) as seqs 1.. of a new
    actor in a new SQLite store at ``db``."""

    async def write() -> None:
        store = SqliteStore(db)
        await store.open()
        try:
            await store.register_actor(actor, "demo.FanOut")
            rows = [
                _codec.make_row(
                    actor,
                    seq,
                    kind,
                    tag,
                    ref,
                    mid,
                    _codec.encode_plain(payload, f"{kind} entry"),
                )
                for seq, (kind, tag, ref, mid, payload) in enumerate(entries, start=1)
            ]
            await store.append(actor, 0, rows)
        finally:
            await store.close()

    anyio.run(write, backend="asyncio")


# -- a real fan-out: the example, four tasks x two dependent calls -----------------

_BARRIER: list[Any] = [0, anyio.Event()]


def reset_barrier() -> None:
    _BARRIER[:] = [0, anyio.Event()]


@tool(effect="read", name="write_a")
async def write_a(i: int) -> str:
    """Returns once all four first calls run (a barrier): they overlap by construction."""
    _BARRIER[0] += 1
    if _BARRIER[0] == 4:
        _BARRIER[1].set()
    await _BARRIER[1].wait()
    return f"w-a{i}"


@tool(effect="read", name="write_b")
async def write_b(text: str) -> str:
    return f"done {text}"


@attrs.define
class Nothing:
    pass


@attrs.define
class Go:
    name: str


class Fanned(Actor[Nothing]):
    async def receive(self, ctx: Context, msg: Go) -> str:
        async def one(i: int) -> None:
            a = await ctx.call(write_a, i)
            await ctx.call(write_b, f"b{i}-" + a)

        async with anyio.create_task_group() as tg:
            for i in range(4):
                tg.start_soon(one, i)
        return "ok"
