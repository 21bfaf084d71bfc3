"""Reading a store the way recovery does: opening it, actor status, one entry, export and
leases; and the read helpers that history, verify and the writes share."""

from __future__ import annotations

import base64
import contextlib
import datetime
import json
import os
import time
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any

import anyio

from .._durability import decisions as _decisions
from .._durability.plan import plan as read_plan
from .._journal import codec as _codec, compact as _compact
from .._journal.errors import (
    ActorNotFoundError,
    CorruptEntryError,
    RecoveryError,
    StoreUnavailableError,
    WALError,
)
from .._journal.ids import idempotency_key
from .._journal.leases import Lease
from .._journal.records import EntryKind, EventKind, IntentRecord, Record, Recorded, decode_entry
from ..store import ActorRow, AuditStore, EntryRow, SnapshotInfo, Store
from .models import (
    ActorStatus,
    EntryView,
    Event,
    InDoubtIntent,
)

_CHUNK = 5_000


@contextlib.asynccontextmanager
async def opened(url: str, *, read_only: bool = True) -> AsyncIterator[Store]:
    """Open the store a URL names (read-only by default) and close it afterwards.

    A read-only SQLite store is safe to read while a runtime writes it (WAL readers). With
    ``read_only=False`` the URL must name an existing actorlog store of a supported format
    (checked read-only first); nothing is ever created.

    Raises:
        StoreURLError: the URL does not parse.
        StoreUnavailableError: the store cannot be opened (a SQLite file that does not exist,
            is a directory or cannot be read), or, for writing, is not an actorlog store.
        UnsupportedFormatError: the store has a newer format; nothing was changed.
        StoreLockedError: ``read_only=False`` on a SQLite file a runtime holds.
    """
    from actorlog.stores import open_store

    store = open_store(url, read_only=read_only)
    path = getattr(store, "path", None)
    if isinstance(path, str):
        # Checked before SQLite sees it: a writable SqliteStore would create an empty store
        # where a typo points; and a connect that fails (a directory, an unreadable file)
        # gets a message naming the problem instead of SQLite's.
        p = anyio.Path(path)
        if not await p.exists():
            raise StoreUnavailableError(f"no SQLite store at {path}")
        if not await p.is_file():
            raise StoreUnavailableError(f"{path} is not a file, so not a SQLite store")
        if not os.access(path, os.R_OK if read_only else os.R_OK | os.W_OK):
            what = "read" if read_only else "read and write"
            raise StoreUnavailableError(f"cannot open SQLite store {path}: no permission to {what}")
    if not read_only:
        await _must_be_a_store(url)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


async def _must_be_a_store(url: str) -> None:
    """Refuse an operator's write into anything but an existing actorlog store of a supported
    version. Checked through a read-only open, which changes nothing: opening for writing
    would create actorlog's tables (and switch SQLite to WAL) in an empty file or another
    application's database, and switch the journal mode of a newer-format store before
    finding out.

    Raises:
        UnsupportedFormatError: a store of a newer format.
        StoreUnavailableError: not an actorlog store.
    """
    from actorlog.stores import open_store

    probe = open_store(url, read_only=True)
    try:
        await probe.open()
        try:
            await probe.list_actors()
        except StoreUnavailableError as exc:
            where = getattr(probe, "path", None) or "the store"
            raise StoreUnavailableError(
                f"{where} is not an actorlog store ({exc}); nothing was changed"
            ) from None
    finally:
        await probe.close()


async def _actor_row(store: Store, actor_id: str) -> ActorRow:
    row = await store.get_actor(actor_id)
    if row is None:
        audit = await _deleted_audit(store, actor_id)
        raise ActorNotFoundError(audit or f"no actor {actor_id!r} in {store.url}")
    return row


async def _deleted_audit(store: Store, actor_id: str) -> str | None:
    """How an actor that is not in the store left it (``delete``, its audit row), or None."""
    if not isinstance(store, AuditStore):
        return None
    rows = [r for r in await store.read_audit(actor_id) if r.kind == "deleted"]
    if not rows:
        return None
    try:
        d = json.loads(rows[-1].detail)
    except ValueError:
        d = {}
    d = d if isinstance(d, dict) else {}
    at = datetime.datetime.fromtimestamp(rows[-1].at).astimezone().isoformat(timespec="seconds")
    why = f" ({d['reason']})" if d.get("reason") else ""
    return (
        f"actor {actor_id!r} was deleted from {store.url} at {at} by {d.get('by') or '?'}{why}; "
        "only its audit row is left (actorlog actors --deleted)"
    )


def _intent_state(rec: Recorded, intent: IntentRecord) -> str | None:
    """The in-doubt state of a recorded intent, or None if its outcome is settled."""
    return _decisions.state(rec.outcomes, intent.policy)


def _fork_point(events: Sequence[Event]) -> int | None:
    """The seq this actor was forked at (its log up to it is a copy), or None."""
    for e in events:
        if e.kind == EventKind.FORKED:
            at = e.detail.get("at")
            return at if isinstance(at, int) and not isinstance(at, bool) else None
    return None


def _run_key(
    actor_id: str,
    fork_at: int | None,
    intent_seq: int,
    step_seq: int,
    index: int,
    key: str,
    outcome_seq: int | None,
    incarnation: str | None,
    task: str | None = None,
) -> str:
    """The idempotency key a call ran (or will run) with. The runtime derives it from the
    running actor's id and the incarnation its step's message records ([F13]), so a fork
    that settles a copied intent (one at or before the fork point, without an outcome in
    the copy) runs it with the fork's key, not the recorded one. ``task``: the call's task
    ([F18]); None: read from the recorded key (its last component is ``{task}.{index}``)."""
    if (
        fork_at is not None
        and intent_seq <= fork_at
        and (outcome_seq is None or outcome_seq > fork_at)
    ):
        if task is None:
            last = key.rsplit(":", 1)[-1]
            task = last.rsplit(".", 1)[0] if "." in last else ""
        return idempotency_key(actor_id, step_seq, index, incarnation=incarnation, task=task)
    return key


def _failure(events: Sequence[Event]) -> tuple[str, str] | None:
    """How (the event's word: ``quarantined`` or ``stopped``) and why the last runtime
    stopped the actor, unless it has recovered since."""
    for i in range(len(events) - 1, -1, -1):
        e = events[i]
        if e.kind in (EventKind.RECOVERED, EventKind.RESTARTED):
            return None
        if e.kind in (EventKind.QUARANTINED, EventKind.STOPPED):
            err = e.detail.get("error") or e.detail.get("raw") or e.kind
            etype = e.detail.get("error_type")
            text = f"{etype}: {err}" if etype else str(err)
            if etype == "SequenceConflictError":
                text += _conflicting_operator_write(events[:i])
            return e.kind, text
    return None


def _ended(events: Sequence[Event]) -> str | None:
    """``finished`` or ``terminated`` if the actor ended (``_lifecycle``), else None."""
    for e in events:
        if e.kind in (EventKind.FINISHED, EventKind.TERMINATED):
            return e.kind
    return None


def _conflicting_operator_write(before: Sequence[Event]) -> str:
    """What an operator wrote offline since the runtime last recovered the actor: the likely
    other writer of a conflict (the runtime running the actor did not see it)."""
    for e in reversed(before):
        if e.kind == EventKind.RECOVERED:
            return ""
        d = e.detail
        if e.kind == EventKind.RESOLVED and d.get("offline"):
            return (
                f" (the conflicting write was the offline decision seq {d.get('decision_seq')} "
                f"by {d.get('by')} on intent seq {d.get('intent_seq')}, which the runtime "
                "running this actor did not see; restart that runtime and its recovery "
                "applies the decision)"
            )
    return ""


async def _events(store: Store, actor_id: str) -> list[Event]:
    out = []
    for ev in await store.read_events(actor_id):
        try:
            detail = json.loads(ev.detail)
        except ValueError:
            detail = {"raw": ev.detail}
        if not isinstance(detail, dict):
            detail = {"raw": detail}
        out.append(Event(at=ev.at, kind=ev.kind, detail=detail))
    return out


async def _status(store: Store, row: ActorRow) -> ActorStatus:
    snaps = await store.list_snapshots(row.actor_id)
    tag, version = (snaps[0].type_tag, snaps[0].schema_version) if snaps else ("", 0)
    problem: str | None = None
    in_doubt: list[InDoubtIntent] = []
    pending = 0
    status = "idle"
    try:
        p = await read_plan(
            store,
            row.actor_id,
            state_tag=tag,
            schema_version=version,
            on_reject=lambda _info, _reason: None,
        )
    except (WALError, RecoveryError) as exc:
        status, problem = "quarantined", str(exc)
        if row.last_message_seq > row.handled_seq:  # best effort: the log is damaged
            with contextlib.suppress(WALError):  # a row of the wrong type, say
                pending = len(
                    await store.read(
                        row.actor_id, after_seq=row.handled_seq, kinds=(EntryKind.MESSAGE,)
                    )
                )
    else:
        events = await _events(store, row.actor_id)
        fork_at = _fork_point(events)
        unfinished = [m for m in p.messages if m.step is None]
        pending = len(unfinished)
        if unfinished:
            m = unfinished[0]
            for rec in m.recorded:
                intent = rec.record
                if not isinstance(intent, IntentRecord):
                    continue
                state = _intent_state(rec, intent)
                if state is None:
                    continue
                in_doubt.append(
                    InDoubtIntent(
                        intent_seq=rec.seq,
                        step_seq=m.seq,
                        tool=rec.type_tag,
                        effect=intent.effect,
                        policy=intent.policy,
                        key=_run_key(
                            row.actor_id,
                            fork_at,
                            rec.seq,
                            m.seq,
                            intent.index,
                            intent.key,
                            None,
                            m.incarnation,
                            intent.task,
                        ),
                        args=list(intent.args),
                        kwargs=dict(intent.kwargs),
                        at=intent.at,
                        state=state,
                        task=intent.task or None,
                    )
                )
        failure = _failure(events)
        end = _ended(events)
        if end is not None:  # finished (ctx.stop) or terminated: no more steps, for good
            status = end
        elif failure is not None:  # the same word as the event: quarantined or stopped
            status, problem = failure
        elif any(i.needs_operator for i in in_doubt):
            status = "in_doubt"
        elif pending:
            status = "running"
    valid = [s for s in snaps if s.seq <= row.last_seq]
    return ActorStatus(
        actor_id=row.actor_id,
        actor_type=row.actor_type,
        status=status,
        problem=problem,
        last_seq=row.last_seq,
        first_seq=row.first_seq,
        last_message_seq=row.last_message_seq,
        handled_seq=row.handled_seq,
        pending_messages=pending,
        last_snapshot_seq=valid[0].seq if valid else None,
        last_snapshot_at=valid[0].created_at if valid else None,
        in_doubt=in_doubt,
        created_at=row.created_at,
    )


async def list_actors(store: Store) -> list[ActorStatus]:
    """Every actor with its status, by id. Reads what recovery would read for each, each in
    one consistent read (see :func:`verify`)."""
    out = []
    for listed in await store.list_actors():
        if listed.damage is not None:  # its summary row is damaged: status from what is left
            out.append(await _status(store, listed))
        else:
            out.append(await actor_status(store, listed.actor_id))
    return out


async def actor_status(store: Store, actor_id: str) -> ActorStatus:
    """One actor's status. Raises ``ActorNotFoundError``."""
    async with _reading(store) as (view, _):
        return await _status(view, await _actor_row(view, actor_id))


async def _scan(
    store: Store, actor_id: str, *, after: int = 0, upto: int | None = None
) -> AsyncIterator[EntryRow]:
    """Every stored row with ``after < seq <= upto``, in seq order, in chunks."""
    while True:
        rows = await store.read(actor_id, after_seq=after, upto_seq=upto, limit=_CHUNK)
        for r in rows:
            yield r
        if len(rows) < _CHUNK:
            return
        after = rows[-1].seq


def _check(row: EntryRow, actor_id: str) -> tuple[Record | None, CorruptEntryError | None]:
    """Verify a row at its own seq and decode it: (record, None) or (None, error)."""
    try:
        _codec.verify_row(row, actor_id, row.seq)
        return decode_entry(row), None
    except CorruptEntryError as exc:
        return None, exc


def _shown_payload(row: EntryRow) -> tuple[Any, bool]:
    """The payload as stored, for an operator to read whole (unknown keys too): the JSON
    value, or ``{"payload_b64": ...}`` when it is not JSON; and whether it is JSON."""
    try:
        return _codec.decode_json(row.payload), True
    except (ValueError, UnicodeDecodeError):
        return {"payload_b64": base64.b64encode(row.payload).decode()}, False


async def _row_at(store: Store, actor_id: str, seq: int) -> EntryRow | None:
    rows = await store.read(actor_id, after_seq=seq - 1, upto_seq=seq)
    return rows[0] if rows else None


async def _snapshot_problem(store: Store, info: SnapshotInfo, last_seq: int) -> str | None:
    if info.damage is not None:
        return info.damage
    if info.seq > last_seq:
        return f"covers seq {info.seq}, beyond the log's last seq {last_seq}"
    if info.handled_seq > info.seq:
        return f"handled seq {info.handled_seq} is beyond its seq {info.seq}"
    snap = await store.load_snapshot(info.actor_id, info.seq)
    if snap is None:
        return "missing"
    if len(snap.data) != info.size:
        return f"size {len(snap.data)} bytes, recorded {info.size}"
    if _codec.info_digest(info, snap.data) != info.digest:
        return "digest mismatch"
    try:
        json.loads(_compact.snapshot_json(snap.data))
    except ValueError as exc:
        return f"undecodable: {exc}"
    return None


async def show(store: Store, actor_id: str, seq: int) -> EntryView:
    """One entry in full, decoded, with its checksum checked and its related entries.

    Raises:
        ActorNotFoundError: no such actor, or no entry at ``seq``.
    """
    _codec.validate_int(seq, "seq")
    async with _reading(store) as (view, _):
        return await _show(view, actor_id, seq)


async def _show(store: Store, actor_id: str, seq: int) -> EntryView:
    await _actor_row(store, actor_id)
    row = await _row_at(store, actor_id, seq)
    if row is None:
        raise ActorNotFoundError(f"actor {actor_id!r} has no entry at seq {seq}")
    computed = _codec.entry_checksum(
        row.actor_id, row.seq, row.kind, row.type_tag, row.ref, row.message_id, row.payload
    )
    _, err = _check(row, actor_id)
    payload, _ = _shown_payload(row)
    if isinstance(payload, list):  # [F19] a compact payload: shown with its field names
        with contextlib.suppress(ValueError):
            payload = _compact.to_object(row.kind, payload)
    related: list[dict[str, Any]] = []

    def rel(r: EntryRow, how: str) -> None:
        related.append({"seq": r.seq, "kind": r.kind, "type_tag": r.type_tag, "relation": how})

    if row.kind == EntryKind.MESSAGE:
        for kind in (EntryKind.INTENT, EntryKind.EFFECT, EntryKind.STEP):
            for r in await store.find_ref(actor_id, kind, row.seq):
                rel(r, f"{kind} of this message's step")
    elif row.kind == EntryKind.INTENT:
        msg = await _row_at(store, actor_id, row.ref)
        if msg is not None:
            rel(msg, "message of its step")
        for kind in (EntryKind.RESULT, EntryKind.DECISION):
            for r in await store.find_ref(actor_id, kind, row.seq):
                rel(r, f"{kind} of this intent")
    elif row.kind in (EntryKind.EFFECT, EntryKind.STEP):
        msg = await _row_at(store, actor_id, row.ref)
        if msg is not None:
            rel(msg, "message of its step")
    elif row.kind in (EntryKind.RESULT, EntryKind.DECISION):
        intent = await _row_at(store, actor_id, row.ref)
        if intent is not None:
            rel(intent, "its intent")
    related.sort(key=lambda d: d["seq"])
    return EntryView(
        actor_id=actor_id,
        seq=row.seq,
        kind=row.kind,
        type_tag=row.type_tag,
        ref=row.ref,
        message_id=row.message_id,
        checksum=row.checksum,
        computed_checksum=computed,
        valid=err is None,
        problem=None if err is None else str(err),
        size=len(row.payload),
        payload=payload,
        related=related,
    )


@contextlib.asynccontextmanager
async def _reading(store: Store) -> AsyncIterator[tuple[Store, bool]]:
    """The store as one consistent read (its optional ``reading()``), and whether it is."""
    reading = getattr(store, "reading", None)
    if reading is None:
        yield store, False
        return
    async with reading() as view:
        yield view, True


async def export(
    store: Store, actor_id: str, *, raw: bool = False
) -> AsyncGenerator[dict[str, Any], None]:
    """The actor's whole log, snapshots and operator history as JSON-ready dicts, for audit.

    Yields one ``{"type": "actor"}`` header, then every ``entry`` in seq order (``valid``
    says whether it passed its checks; ``payload`` is the decoded body, with the exact bytes
    in ``payload_b64`` when ``raw`` or when they are not valid JSON), then every ``snapshot``
    (with its decoded ``state``), then every ``event``. All of it from one consistent read.
    """
    async with _reading(store) as (view, _):
        async for item in _export(view, actor_id, raw=raw):
            yield item


async def _export(store: Store, actor_id: str, *, raw: bool) -> AsyncIterator[dict[str, Any]]:
    row = await _actor_row(store, actor_id)
    yield {
        "type": "actor",
        "actor_id": row.actor_id,
        "actor_type": row.actor_type,
        "last_seq": row.last_seq,
        "first_seq": row.first_seq,
        "last_message_seq": row.last_message_seq,
        "handled_seq": row.handled_seq,
        "created_at": row.created_at,
        "store": store.url,
        "exported_at": time.time(),
    }
    async for r in _scan(store, actor_id):
        _, err = _check(r, actor_id)
        d: dict[str, Any] = {
            "type": "entry",
            "seq": r.seq,
            "kind": r.kind,
            "type_tag": r.type_tag,
            "ref": r.ref,
            "message_id": r.message_id,
            "checksum": r.checksum,
            "valid": err is None,
            "problem": None if err is None else str(err),
        }
        payload, is_json = _shown_payload(r)
        d["payload"] = payload if is_json else None
        if raw or not is_json:
            d["payload_b64"] = base64.b64encode(r.payload).decode()
        yield d
    for info in await store.list_snapshots(actor_id):
        snap = await store.load_snapshot(actor_id, info.seq)
        problem = await _snapshot_problem(store, info, row.last_seq)
        state: Any = None
        if snap is not None:
            try:
                state = json.loads(_compact.snapshot_json(snap.data))
            except ValueError:
                state = {"data_b64": base64.b64encode(snap.data).decode()}
        yield {
            "type": "snapshot",
            "seq": info.seq,
            "handled_seq": info.handled_seq,
            "type_tag": info.type_tag,
            "schema_version": info.schema_version,
            "digest": info.digest.hex(),
            "size": info.size,
            "created_at": info.created_at,
            "valid": problem is None,
            "problem": problem,
            "state": state,
        }
    for e in await _events(store, actor_id):
        yield {"type": "event", "at": e.at, "kind": e.kind, "detail": e.detail}


# -- ownership (PostgreSQL leases; docs/scaling.md) -----------------------------------------


async def leases(store: Store) -> list[Lease]:
    """Every actor's lease -- owner, fencing token, seconds to expiry -- by actor id, for a
    store shared by several runtimes (``capabilities.leases``); empty for other stores."""
    list_leases = getattr(store, "list_leases", None)
    if not store.capabilities.leases or list_leases is None:
        return []
    return [Lease(a, o, t, e) for a, o, t, e in await list_leases()]
