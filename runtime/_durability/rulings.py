"""Rulings on cancelled writes in doubt (issue 25; docs/operators.md "Cancelled writes in
doubt"): the one check and the one record that ``actorlog resolve``, ``ops.resolve``, the
console and ``ActorSystem.resolve`` share.

A write its handler's own scope cancelled while its tool ran, whose policy escalates, has
its result ``settled_by: cancelled`` with ``in_doubt: true`` (FORMAT.md [F18]). The step
went on, so a ruling changes no entry: it is a ``resolved`` event of the operator history
with ``"ruling": true``. One ruling per call: the check reads the history first, and every
live ruling of an actor is made by one runtime, one at a time: the one running it, or, on a
store with leases, its owner, reached through the inbox (``RULING_TAG``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterable
from typing import Any

import anyio

from .._journal import codec as _codec, records as _records
from .._journal.entrykinds import EventKind
from .._journal.errors import (
    ActorlogError,
    ActorNotFoundError,
    AlreadyDecidedError,
    ConfigurationError,
)
from .._journal.records import DecisionAction, DecisionRecord, ResultRecord, SettledBy
from ..store import EventRow, Store

__all__ = [
    "RULING_TAG",
    "KeyedLock",
    "check",
    "command",
    "detail_of",
    "may_need_ruling",
    "record",
    "rule_live",
    "ruling_in",
    "wait_for",
]

#: type tag of a ruling sent to the actor's owner through a leased store's inbox
RULING_TAG = "actorlog.ruling"


class KeyedLock:
    """One lock per key, held only while in use: rulings on different actors (and spawns of
    them, ``ActorSystem``) run concurrently; two on one actor id never do."""

    __slots__ = ("_locks",)

    def __init__(self) -> None:
        self._locks: dict[str, tuple[anyio.Lock, list[int]]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        entry = self._locks.get(key)
        if entry is None:
            entry = self._locks[key] = (anyio.Lock(), [0])
        lock, users = entry
        users[0] += 1
        try:
            async with lock:
                yield
        finally:
            users[0] -= 1
            if not users[0]:
                del self._locks[key]


#: the live rulings of this process, one at a time per actor (check, then record)
_LOCKS = KeyedLock()


def _detail(ev: EventRow) -> dict[str, Any]:
    if ev.damage is not None:
        return {}
    try:
        value = json.loads(ev.detail)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def ruling_in(events: Iterable[EventRow], intent_seq: int) -> tuple[dict[str, Any], float] | None:
    """The first ruling the operator history records on ``intent_seq`` (its detail and
    time), or None. The same reading as ``ops.history``'s ``Call.ruling``."""
    for ev in events:
        if ev.kind != EventKind.RESOLVED:
            continue
        d = _detail(ev)
        if (
            d.get("ruling") is True
            and d.get("intent_seq") == intent_seq
            and d.get("action") in (DecisionAction.RESULT, DecisionAction.FAIL)
        ):
            return d, ev.at
    return None


async def _cancelled(store: Store, actor_id: str, intent_seq: int) -> tuple[str, bool] | None:
    """The tool's name, and whether it is in doubt, if ``intent_seq``'s outcome is a
    cancelled result."""
    results = await store.find_ref(actor_id, "result", intent_seq)
    if not results:
        return None
    first = min(results, key=lambda r: r.seq)
    _codec.verify_row(first, actor_id, first.seq)
    rec = _records.decode_entry(first)
    if isinstance(rec, ResultRecord) and rec.settled_by == SettledBy.CANCELLED:
        return first.type_tag, rec.in_doubt
    return None


async def _cancelled_in_doubt(store: Store, actor_id: str, intent_seq: int) -> str | None:
    """The tool's name if ``intent_seq``'s outcome is a cancelled write in doubt."""
    found = await _cancelled(store, actor_id, intent_seq)
    return found[0] if found is not None and found[1] else None


async def check(store: Store, actor_id: str, intent_seq: int, action: str) -> str | None:
    """If ``intent_seq`` is a cancelled write in doubt, check that ``action`` may rule on it
    and return its tool's name; None if it is not one.

    Raises:
        ConfigurationError: ``action`` is ``retry``.
        AlreadyDecidedError: it has its ruling already.
    """
    tool = await _cancelled_in_doubt(store, actor_id, intent_seq)
    if tool is None:
        return None
    if action == DecisionAction.RETRY:
        raise ConfigurationError(
            f"intent seq {intent_seq} of actor {actor_id!r} ({tool}) was cancelled by its "
            "handler while it ran and the step went on: a retry cannot run. Rule with "
            "result= (it happened) or fail= (it did not)"
        )
    found = ruling_in(await store.read_events(actor_id), intent_seq)
    if found is not None:
        raise _already(actor_id, intent_seq, *found)
    return tool


def _already(actor_id: str, intent_seq: int, d: dict[str, Any], at: float) -> AlreadyDecidedError:
    return AlreadyDecidedError(
        actor_id, intent_seq, action=str(d.get("action")), by=str(d.get("by", "")), at=at, seq=None
    )


def detail_of(
    intent_seq: int, tool: str, decision: DecisionRecord, *, offline: bool, ruling_id: str
) -> dict[str, Any]:
    """The ``resolved`` event that records a ruling (and the inbox command carrying it)."""
    detail: dict[str, Any] = {
        "intent_seq": intent_seq,
        "action": decision.action,
        "tool": tool,
        "by": decision.by,
        "reason": decision.reason,
        "ruling": True,
        "offline": offline,
        "ruling_id": ruling_id,
    }
    if decision.action == DecisionAction.RESULT:
        detail["value"] = decision.value
    else:
        detail["error"] = None if decision.error is None else dict(decision.error.payload())
    return detail


async def record(store: Store, actor_id: str, detail: dict[str, Any]) -> None:
    """Record the ruling (checked by :func:`check`) in the operator history."""
    await store.record_event(actor_id, EventKind.RESOLVED, json.dumps(detail))


async def rule_live(
    store: Store, actor_id: str, intent_seq: int, decision: DecisionRecord, here: bool
) -> bool:
    """``ActorSystem.resolve`` on a cancelled write in doubt: record the ruling (``here``:
    this runtime runs the actor, or runs every actor of the store) or send it to the actor's
    owner through the inbox and wait until the owner recorded it. False (nothing done) if
    ``intent_seq`` is not a cancelled write in doubt.

    Raises:
        ConfigurationError: ``decision`` is a retry.
        AlreadyDecidedError: the call has its ruling (also: one recorded while this one
            was on its way to the owner, which then dropped it).
    """
    inbox_put = getattr(store, "inbox_put", None)
    remote = not here and store.capabilities.leases and inbox_put is not None
    ruling_id = _codec.new_message_id()
    async with _LOCKS.hold(actor_id):
        tool = await check(store, actor_id, intent_seq, decision.action)
        if tool is None:
            return False
        detail = detail_of(intent_seq, tool, decision, offline=False, ruling_id=ruling_id)
        if not remote:
            await record(store, actor_id, detail)
            return True
    assert inbox_put is not None
    await inbox_put(actor_id, f"{RULING_TAG}-{ruling_id}", RULING_TAG, json.dumps(detail), None)
    await wait_for(store, actor_id, intent_seq, ruling_id)
    return True


async def command(store: Store, actor_id: str, body: str) -> None:
    """A ruling that came to the owner through the inbox: recorded unless the call has its
    ruling already (the sender, waiting in :func:`wait_for`, then finds the other one)."""
    try:
        detail = json.loads(body)
    except ValueError:
        return
    seq = detail.get("intent_seq") if isinstance(detail, dict) else None
    if not isinstance(seq, int) or isinstance(seq, bool):
        return
    async with _LOCKS.hold(actor_id):
        try:
            if await check(store, actor_id, seq, str(detail.get("action"))) is None:
                return
        except ConfigurationError:  # ruled already (or a retry): the sender is told
            return
        await record(store, actor_id, detail)


async def wait_for(store: Store, actor_id: str, intent_seq: int, ruling_id: str) -> None:
    """Wait until the owner recorded a ruling on ``intent_seq``: return if it is the one
    sent as ``ruling_id``.

    Raises:
        AlreadyDecidedError: another ruling was recorded first (this one was dropped).
        ActorNotFoundError: the actor was deleted meanwhile.
    """
    delay = 0.01
    while True:
        found = ruling_in(await store.read_events(actor_id), intent_seq)
        if found is not None:
            if found[0].get("ruling_id") == ruling_id:
                return
            raise _already(actor_id, intent_seq, *found)
        if await store.get_actor(actor_id) is None:
            raise ActorNotFoundError(f"actor {actor_id!r} is not in the store")
        await anyio.sleep(delay)
        delay = min(delay * 2, 0.5)


async def may_need_ruling(store: Store, actor_id: str) -> bool:
    """Whether the actor may have a call waiting for a ruling, from cheap reads: a call the
    runtime reported in doubt (its ``in_doubt`` event) that has no ruling yet and whose
    outcome is a cancelled result (or cannot be read). The console reads the whole history
    (``ops.calls_needing_ruling``, which decides) only for such an actor."""
    events = await store.read_events(actor_id)
    seqs = {
        d["intent_seq"]
        for d in (_detail(ev) for ev in events if ev.kind == EventKind.IN_DOUBT)
        if isinstance(d.get("intent_seq"), int)
    }
    for seq in sorted(seqs):
        if ruling_in(events, seq) is not None:
            continue
        try:
            if await _cancelled(store, actor_id, seq) is not None:
                return True
        except ActorlogError:  # damage: the history says what it is
            return True
    return False
