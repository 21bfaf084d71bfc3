"""Retention and compaction: which start of an actor's log may go, and removing it.

A retention is ``"all"`` (keep everything: an audit trail), ``"since-snapshot"`` (entries
covered by the oldest kept snapshot may go) or a time window (seconds, or a ``timedelta``:
like ``"since-snapshot"``, but never an entry of a message logged within the window).

The bound (docs/recovery.md, "Retention and compaction"): compaction removes entries
``first_seq .. upto`` where ``upto`` is at most the oldest *valid* kept snapshot's
``handled_seq - 1``. So every kept snapshot can still be recovered from (its unhandled
messages and everything after it stay, and the last handled message too, so ``verify``
can compare the summary row and a repeated ``ask`` of it is still answered), and what is
left is a contiguous log that ``verify`` and ``history`` read as usual. It also stops
before any damaged entry (damage is for an operator to see, not for compaction to hide),
before any intent with no result or decision (in doubt), and, with a window, before the
first message logged within it. The message-id deduplication window is the kept log.
"""

from __future__ import annotations

import json
import logging
import math
import time
from datetime import timedelta
from typing import Any

import attrs

from .._journal import codec as _codec
from .._journal.entrykinds import EventKind
from .._journal.errors import ActorlogError, ConfigurationError, CorruptEntryError
from .._journal.records import (
    DecisionRecord,
    IntentRecord,
    MessageRecord,
    ResultRecord,
    decode_entry,
)
from .._tracing.telemetry import ATTR, SPAN, set_error, tracer
from ..store import CompactingStore, Store

__all__ = ["Compaction", "Retention", "bound", "compact", "describe", "parse"]

logger = logging.getLogger("actorlog")

#: ``"all"``, ``"since-snapshot"``, or a window in seconds
Retention = str | float

#: Most entries one store call removes: a long log is compacted in several short
#: transactions, so appends never wait long behind one.
MAX_PER_CALL = 10_000
#: Most entries one compaction looks at (and may remove): the first compaction of a long
#: log is spread over several snapshots instead of one long scan on the event loop.
MAX_SCAN = 100_000
_READ_CHUNK = 2_000


def parse(value: object) -> Retention:
    """Check a ``retention`` value and return it as it is saved: ``"all"``,
    ``"since-snapshot"`` or a positive, finite number of seconds (from a ``timedelta`` or a
    number).

    Raises:
        ConfigurationError: anything else, naming the value.
    """
    if value in ("all", "since-snapshot") and isinstance(value, str):
        return value
    seconds: object = value.total_seconds() if isinstance(value, timedelta) else value
    if (
        isinstance(seconds, int | float)
        and not isinstance(seconds, bool)
        and 0 < seconds < math.inf
    ):
        return float(seconds)
    raise ConfigurationError(
        "retention must be 'all', 'since-snapshot' or a positive time window "
        f"(a timedelta or seconds), not {_codec.shown(value)}"
    )


def describe(retention: Retention) -> str:
    """For events and messages: ``"all"``, ``"since-snapshot"`` or ``"window 3600s"``."""
    return retention if isinstance(retention, str) else f"window {retention:g}s"


@attrs.frozen
class Compaction:
    """What one compaction of one actor did (``removed`` 0: nothing could go)."""

    actor_id: str
    first_seq: int
    removed: int
    reason: str


async def bound(
    store: Store,
    actor_id: str,
    retention: Retention,
    *,
    schema_version: int | None = None,
    now: float | None = None,
) -> tuple[int, int, str]:
    """``(first_seq, upto, reason)``: entries ``first_seq .. upto`` may be removed
    (``upto < first_seq``: none); ``reason`` says what stopped it there.

    ``schema_version``: the actor class's; snapshots of another version are not counted
    (recovery would not load them). Offline (``None``), a snapshot's own version is used.
    """
    actor = await store.get_actor(actor_id)
    if actor is None or actor.last_seq == 0 or retention == "all":
        return 1, 0, "nothing to compact" if retention != "all" else "retention is 'all'"
    first = max(1, actor.first_seq)
    # the oldest valid snapshot (a damaged or foreign one is not a fallback recovery can use)
    base = None
    for info in reversed(await store.list_snapshots(actor_id)):
        if not (isinstance(info.seq, int) and 0 < info.handled_seq <= info.seq <= actor.last_seq):
            continue
        if schema_version is not None and info.schema_version != schema_version:
            continue
        snap = await store.load_snapshot(actor_id, info.seq)
        if snap is None or len(snap.data) != info.size:
            continue
        if _codec.info_digest(info, snap.data) != info.digest:
            continue
        base = info
        break
    if base is None:
        return first, 0, "no valid snapshot"
    upto, reason = base.handled_seq - 1, f"the oldest valid snapshot (seq {base.seq})"
    if upto >= first + MAX_SCAN:
        upto, reason = first + MAX_SCAN - 1, f"the scan limit ({MAX_SCAN:,} entries per compaction)"
    # beyond ``upto``, read only far enough to find the outcomes of intents before it
    end = min(base.seq, upto + 5 * _READ_CHUNK)
    cutoff = None if isinstance(retention, str) else (now or time.time()) - retention
    pending: dict[int, int] = {}  # intent seq -> itself, while it has no result or decision
    after = first - 1
    while after < end:
        rows = await store.read(actor_id, after_seq=after, upto_seq=end, limit=_READ_CHUNK)
        if not rows:
            break
        for row in rows:
            expected = after + 1
            after = row.seq
            try:
                _codec.verify_row(row, actor_id, expected)
                rec = decode_entry(row)
            except (CorruptEntryError, ValueError) as exc:
                if expected <= upto:
                    upto, reason = expected - 1, f"damage at seq {expected} ({exc})"
                break
            if row.seq > upto:
                if isinstance(rec, ResultRecord | DecisionRecord):
                    pending.pop(row.ref, None)
                continue
            if isinstance(rec, MessageRecord) and cutoff is not None:
                if rec.at is None or rec.at >= cutoff:
                    upto, reason = row.seq - 1, f"the retention window ({describe(retention)})"
            elif isinstance(rec, IntentRecord):
                pending[row.seq] = row.seq
            elif isinstance(rec, ResultRecord | DecisionRecord):
                pending.pop(row.ref, None)
        else:
            continue
        break
    if pending and min(pending) <= upto:
        upto, reason = min(pending) - 1, f"an intent with no outcome at seq {min(pending)}"
    return first, min(upto, actor.last_seq - 1), reason


async def compact(
    store: Store,
    actor_id: str,
    retention: Retention,
    *,
    by: str,
    schema_version: int | None = None,
    now: float | None = None,
) -> Compaction:
    """Remove what ``retention`` lets go of the actor's log (see the module doc), in
    transactions of at most ``MAX_PER_CALL`` entries, and record a ``compacted`` event.

    A cancellation point; a cancel or crash leaves the log whole and compacted up to some
    point at or before the bound (each store call is atomic).

    Raises:
        ConfigurationError: the store cannot compact (it is not a ``CompactingStore``).
        StoreUnavailableError: the store failed; the log is whole.
    """
    if not isinstance(store, CompactingStore):
        raise ConfigurationError(f"the store {store.url} cannot compact logs")
    attributes = {ATTR.ACTOR_ID: actor_id, ATTR.COMPACT_RETENTION: describe(retention)}
    with tracer.start_as_current_span(SPAN.COMPACT, attributes=attributes) as span:
        try:
            done = await _compact(store, actor_id, retention, by, schema_version, now)
        except Exception as exc:
            set_error(span, f"{type(exc).__name__}: {exc}")
            raise
        span.set_attribute(ATTR.COMPACT_FIRST_SEQ, done.first_seq)
        span.set_attribute(ATTR.COMPACT_REMOVED, done.removed)
        return done


async def _compact(
    store: Store,
    actor_id: str,
    retention: Retention,
    by: str,
    schema_version: int | None,
    now: float | None,
) -> Compaction:
    assert isinstance(store, CompactingStore)
    first, upto, reason = await bound(
        store, actor_id, retention, schema_version=schema_version, now=now
    )
    removed = 0
    start = first
    while start <= upto:
        end = min(upto, start + MAX_PER_CALL - 1)
        removed += await store.compact(
            actor_id, end, checksum=_codec.log_start_checksum(actor_id, end + 1)
        )
        start = end + 1
    if removed:
        detail = {
            "first_seq": start,
            "removed": removed,
            "retention": describe(retention),
            "stopped_by": reason,
            "by": by,
        }
        try:
            await store.record_event(actor_id, EventKind.COMPACTED, json.dumps(detail))
        except ActorlogError:
            pass  # history is best effort; the log start record is the truth
    return Compaction(actor_id, start, removed, reason)


_running: set[tuple[int, str]] = set()


async def after_snapshot(
    store: Store, actor_id: str, retention: Retention, schema_version: int
) -> None:
    """The runtime's background compaction, started after a snapshot is written (never on
    the step's path). One at a time per actor; failures are logged, never raised."""
    key = (id(store), actor_id)
    if key in _running or not isinstance(store, CompactingStore):
        return
    _running.add(key)
    try:
        await compact(store, actor_id, retention, by="runtime", schema_version=schema_version)
    except Exception as exc:
        logger.warning("actor %r: compaction failed: %s", actor_id, exc)
    finally:
        _running.discard(key)


def saved(detail: dict[str, Any]) -> Retention | None:
    """The retention in a saved ``options`` or ``compacted`` event detail, if valid."""
    value = detail.get("retention")
    if isinstance(value, str) and value.startswith("window "):
        value = value[len("window ") : -1]
        try:
            value = float(value)
        except ValueError:
            return None
    try:
        return None if value is None else parse(value)
    except ConfigurationError:
        return None
