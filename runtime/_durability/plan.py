"""Recovery's plan: an actor's log read and verified the way recovery reads it, writing
nothing (docs/recovery.md). ``plan`` returns the newest valid snapshot's state and, in order,
the steps to replay (completed), the step that was interrupted (with its recorded effects) and
the messages still to handle. Recovery (``_core/recovery.py``) drives it for a live cell; the
offline readers use it as it is: ``ops`` (an actor's status, ``verify``), ``read_state`` and the
replay tester. [F13] It also reads back the incarnation id of the log (``log_incarnation``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .._journal import codec as _codec, compact as _compact
from .._journal.errors import (
    CorruptEntryError,
    LogCompactedError,
    RecoveryError,
    StoreClosedError,
    StoreUnavailableError,
)
from .._journal.fields import Value
from .._journal.records import (
    DecisionRecord,
    EffectRecord,
    EntryKind,
    IntentRecord,
    MessageRecord,
    Outcome,
    Recorded,
    ResultRecord,
    StepRecord,
    decode_entry,
)
from ..store import ActorRow, EntryRow, SnapshotInfo, Store

__all__ = ["PendingMessage", "Plan", "decode_failed", "log_incarnation", "plan"]

_READ_CHUNK = 20_000


class PendingMessage(Value):
    """A message recovery read after the handled seq, with what its step recorded."""

    __slots__ = (
        "body",
        "incarnation",
        "message_id",
        "recorded",
        "sender",
        "seq",
        "step",
        "trace",
        "type_tag",
    )

    seq: int
    message_id: str | None
    type_tag: str
    body: Any
    sender: str | None
    trace: dict[str, str] | None
    recorded: list[Recorded]
    #: [F13] the incarnation id recorded in the message entry
    incarnation: str | None
    #: the step's record if the step completed
    step: StepRecord | None

    def __init__(
        self,
        seq: int,
        message_id: str | None,
        type_tag: str,
        body: Any,
        sender: str | None,
        trace: dict[str, str] | None,
        recorded: list[Recorded] | None = None,
        incarnation: str | None = None,
        step: StepRecord | None = None,
    ) -> None:
        self.seq = seq
        self.message_id = message_id
        self.type_tag = type_tag
        self.body = body
        self.sender = sender
        self.trace = trace
        self.recorded = [] if recorded is None else recorded
        self.incarnation = incarnation
        self.step = step


class Plan(Value):
    """What recovery starts from (``plan``'s answer)."""

    __slots__ = (
        "entries_read",
        "handled_seq",
        "incarnation",
        "last_seq",
        "messages",
        "rejected",
        "snapshot_created_at",
        "snapshot_seq",
        "snapshot_size",
        "state",
        "state_data",
    )

    state_data: Any  # plain (unstructured) state, or None for the initial state
    snapshot_seq: int
    snapshot_size: int
    handled_seq: int
    rejected: list[tuple[int, str]]
    messages: list[PendingMessage]  # every message after handled_seq, in seq order
    entries_read: int
    last_seq: int
    #: the state decoded into its class (only when ``plan`` was given ``decode``)
    state: Any
    #: Unix time the snapshot used was written, or the actor registered if none was
    snapshot_created_at: float
    #: [F13] the incarnation id recorded in the log's last message (None: an empty log, or
    #: one whose last message was logged before incarnations existed)
    incarnation: str | None

    def __init__(
        self,
        state_data: Any,
        snapshot_seq: int,
        snapshot_size: int,
        handled_seq: int,
        rejected: list[tuple[int, str]],
        messages: list[PendingMessage],
        entries_read: int,
        last_seq: int,
        state: Any = None,
        snapshot_created_at: float = 0.0,
        incarnation: str | None = None,
    ) -> None:
        self.state_data = state_data
        self.snapshot_seq = snapshot_seq
        self.snapshot_size = snapshot_size
        self.handled_seq = handled_seq
        self.rejected = rejected
        self.messages = messages
        self.entries_read = entries_read
        self.last_seq = last_seq
        self.state = state
        self.snapshot_created_at = snapshot_created_at
        self.incarnation = incarnation


def _verify_snapshot(info: SnapshotInfo, data: bytes, state_tag: str, schema_version: int) -> Any:
    """Return the decoded plain state, or raise ValueError with the reason it was rejected."""
    if info.type_tag != state_tag:
        raise ValueError(f"state type {info.type_tag} is not {state_tag}")
    if info.schema_version != schema_version:
        raise ValueError(f"schema version {info.schema_version} is not {schema_version}")
    if info.handled_seq > info.seq:
        raise ValueError(f"handled seq {info.handled_seq} is beyond its seq {info.seq}")
    if len(data) != info.size or _codec.info_digest(info, data) != info.digest:
        raise ValueError("digest mismatch")
    try:
        return json.loads(_compact.snapshot_json(data))
    except ValueError as exc:
        raise ValueError(f"undecodable: {exc}") from exc


async def plan(
    store: Store,
    actor_id: str,
    *,
    state_tag: str,
    schema_version: int,
    on_reject: Callable[[SnapshotInfo, str], None],
    decode: Callable[[Any], Any] | None = None,
) -> Plan:
    """Read what recovery needs. Raises ``CorruptEntryError`` or ``LogCompactedError``.

    A snapshot is used only if every check passes: its metadata (types included), its
    digest, its JSON and, with ``decode``, decoding it into the state class. Damage of any
    kind rejects it and the next older one is tried; with none left, the plan starts from
    the initial state at seq 1. A store that fails (``StoreUnavailableError``, possibly
    transient) is not damage: that error is raised, and recovering again retries.
    """
    actor = await store.get_actor(actor_id)
    last_seq = actor.last_seq if actor else 0
    first_seq = actor.first_seq if actor else 0

    state_data: Any = None
    snap_seq = 0
    snap_size = 0
    handled = 0
    rejected: list[tuple[int, str]] = []
    state: Any = None
    created_at = actor.created_at if actor else 0.0
    try:
        infos = await store.list_snapshots(actor_id)
    except (StoreUnavailableError, StoreClosedError):
        raise  # the store failed, possibly transiently: stop the actor; a retry recovers
    except Exception as exc:  # damaged snapshot metadata: replay without one
        infos = []
        rejected.append((0, f"snapshots unreadable: {exc}"))
        on_reject(_unreadable(actor_id), f"snapshots unreadable: {exc}")
    for info in infos:
        reason = ""
        try:
            if not isinstance(info.seq, int) or info.seq > last_seq:
                reason = f"covers seq {info.seq} beyond the log's last seq {last_seq}"
            else:
                snap = await store.load_snapshot(actor_id, info.seq)
                if snap is None:
                    reason = "missing"
                else:
                    state_data = _verify_snapshot(info, snap.data, state_tag, schema_version)
                    if decode is not None:
                        try:
                            state = decode(state_data)
                        except Exception as exc:
                            reason = f"does not decode into {state_tag}: {exc}"
        except (StoreUnavailableError, StoreClosedError):
            raise
        except Exception as exc:
            reason = f"unreadable: {exc}" if not isinstance(exc, ValueError) else str(exc)
        if reason:
            rejected.append((info.seq, reason))
            on_reject(info, reason)
            state_data = state = None
            continue
        snap_seq, handled, snap_size = info.seq, info.handled_seq, info.size
        created_at = info.created_at
        break

    if snap_seq == 0 and first_seq > 1:
        raise LogCompactedError(actor_id, first_seq)

    entries_read = 0
    messages: dict[int, PendingMessage] = {}

    def add_message(row: EntryRow, m: MessageRecord) -> None:
        messages[row.seq] = PendingMessage(
            seq=row.seq,
            message_id=row.message_id,
            type_tag=row.type_tag,
            body=m.body,
            sender=m.sender,
            trace=m.trace,
            incarnation=m.incarnation,
        )

    # Messages logged before the snapshot's seq but not yet handled. The whole seq range
    # since the last handled message is read and chain-verified (a range, not a scan of
    # history): selecting only kind='message' would silently skip a message whose kind or
    # seq was damaged, losing an acknowledged message.
    if handled < snap_seq:
        expected_m = handled + 1
        rows = await store.read(actor_id, after_seq=handled, upto_seq=snap_seq)
        for row in _codec.verified_rows(rows, actor_id, expected_m):
            expected_m += 1
            entries_read += 1
            p = decode_entry(row)
            if isinstance(p, MessageRecord):
                add_message(row, p)
        if expected_m <= snap_seq:
            raise CorruptEntryError(
                actor_id, expected_m, "seq chain", f"missing under the snapshot at seq {snap_seq}"
            )

    # The tail, verified entry by entry along the seq chain (each entry before the next is
    # verified: damage is reported at the first damaged entry, in log order).
    intents: dict[int, Recorded] = {}
    task_effects: dict[tuple[int, str], int] = {}  # (step's message seq, task) -> effects
    expected = snap_seq + 1
    while True:
        rows = await store.read(actor_id, after_seq=expected - 1, limit=_READ_CHUNK)
        for row in _codec.verified_rows(rows, actor_id, expected):
            expected += 1
            entries_read += 1
            p = decode_entry(row)
            if isinstance(p, MessageRecord):
                add_message(row, p)
            elif isinstance(p, IntentRecord | EffectRecord):
                msg = messages.get(row.ref)
                if msg is None:
                    if row.ref <= handled:
                        continue  # belongs to a step the snapshot already reflects
                    raise CorruptEntryError(
                        actor_id, row.seq, "reference", f"refers to unknown message seq {row.ref}"
                    )
                rec = Recorded(kind=p.KIND, seq=row.seq, type_tag=row.type_tag, record=p)
                # [F18] contiguous from 0 within each task of the step
                made = task_effects.get((row.ref, p.task), 0)
                if p.index != made:
                    why = f"effect index {p.index} of task {p.task!r} out of order ({made})"
                    raise CorruptEntryError(actor_id, row.seq, "reference", why)
                task_effects[(row.ref, p.task)] = made + 1
                msg.recorded.append(rec)
                if p.KIND == EntryKind.INTENT:
                    intents[row.seq] = rec
            elif isinstance(p, ResultRecord | DecisionRecord):
                rec_i = intents.get(row.ref)
                if rec_i is None:
                    if row.ref <= snap_seq:
                        continue
                    raise CorruptEntryError(
                        actor_id, row.seq, "reference", f"refers to unknown intent seq {row.ref}"
                    )
                rec_i.outcomes.append(Outcome(p, row.type_tag, row.seq))
            elif isinstance(p, StepRecord):
                msg = messages.get(row.ref)
                if msg is None:
                    if row.ref <= handled:
                        continue
                    raise CorruptEntryError(
                        actor_id, row.seq, "reference", f"step of unknown message seq {row.ref}"
                    )
                msg.step = p
        if len(rows) < _READ_CHUNK:
            break
    if expected - 1 < last_seq:
        raise CorruptEntryError(
            actor_id, expected, "seq chain", f"log ends at seq {expected - 1}, expected {last_seq}"
        )
    last = max(messages) if messages else 0
    inc = await log_incarnation(store, actor, last, messages[last].incarnation if last else None)
    ordered = [m for s, m in sorted(messages.items()) if s > handled]
    # Steps complete in message order; a completed step after an incomplete one is damage.
    seen_incomplete = False
    for m in ordered:
        if m.step is None:
            seen_incomplete = True
        elif seen_incomplete:
            raise RecoveryError(actor_id, m.seq, "a step completed after an unfinished one")
    return Plan(
        state_data=state_data,
        snapshot_seq=snap_seq,
        snapshot_size=snap_size,
        handled_seq=handled,
        rejected=rejected,
        messages=ordered,
        entries_read=entries_read,
        last_seq=max(last_seq, expected - 1),
        state=state,
        snapshot_created_at=created_at if isinstance(created_at, int | float) else 0.0,
        incarnation=inc,
    )


def _unreadable(actor_id: str) -> SnapshotInfo:
    """A stand-in for metadata that could not be read (reported as snapshot seq 0)."""
    return SnapshotInfo(actor_id, 0, 0, "", 0, b"", 0, 0.0)


def decode_failed(step: StepRecord) -> bool:
    """A recorded step whose handler never ran: its message could not be decoded, or the
    actor's class did not accept its type (``_step``)."""
    err = step.error
    if step.ok or err is None:
        return False
    if err.type == "ConfigurationError":
        return err.message.startswith(("unknown message type", "cannot decode"))
    return err.type == "TypeError" and " does not accept messages of type " in err.message


async def log_incarnation(
    store: Store, actor: ActorRow | None, last_read: int, last_read_incarnation: str | None
) -> str | None:
    """The incarnation id the log's last message records (None: an empty log, or a last
    message logged before incarnations existed). ``last_read`` is the newest message seq
    recovery read (0: none) and ``last_read_incarnation`` what it records; if the log's last
    message is older than what recovery read (a snapshot covers it), that one entry is read
    and verified. Compaction always keeps it ([F16]).

    Raises:
        CorruptEntryError: that entry is damaged.
    """
    if actor is not None and actor.last_message_seq > last_read:
        seq = actor.last_message_seq
        rows = await store.read(actor.actor_id, after_seq=seq - 1, upto_seq=seq)
        if not rows:
            return None
        _codec.verify_row(rows[0], actor.actor_id, seq)
        rec = decode_entry(rows[0])
        return rec.incarnation if isinstance(rec, MessageRecord) else None
    return last_read_incarnation
