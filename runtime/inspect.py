"""The operator's view of a store: status, history, verify, resolve, fork, export.

Every function takes an open :class:`~actorlog.store.Store` and reads the log the way recovery
does, so what it reports is what a runtime would find. Only :func:`resolve` and :func:`fork`
write, and only through the store's conditional append, so they can never interleave with a
runtime's writes: if a runtime appends to the same actor first, they raise
``SequenceConflictError`` and write nothing.

::

    from actorlog import inspect

    async with inspect.opened("sqlite:///agents.db") as store:      # read-only
        for a in await inspect.list_actors(store):
            print(a.actor_id, a.status, [i.intent_seq for i in a.in_doubt])
        h = await inspect.history(store, "run-42")
        report = await inspect.verify(store)

    async with inspect.opened("sqlite:///agents.db", read_only=False) as store:
        await inspect.resolve(store, "run-42", 19, result="PAGE-991", reason="seen in PagerDuty")

Statuses (:attr:`ActorStatus.status`), most severe first:

* ``quarantined``: recovery would stop at damage in the log (checksum, seq chain, reference).
* ``failed``: the last runtime to run it stopped it for another reason (non-determinism, a
  class it did not know, a conflicting writer), and it has not recovered since.
* ``in_doubt``: its unfinished step has a tool call that may or may not have happened and that
  only an operator can settle (:func:`resolve`).
* ``running``: it has messages logged but not yet handled (a runtime is handling them, or
  will recover them when it next starts).
* ``idle``: nothing to do.
"""

from __future__ import annotations

import base64
import contextlib
import getpass
import json
import math
import os
import socket
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from typing import Any

import anyio
import attrs

from . import _codec, _decisions, _records, _recovery
from ._context import idempotency_key
from ._errors import (
    ActorlogError,
    ActorNotFoundError,
    ConfigurationError,
    CorruptEntryError,
    RecoveryError,
    StoreUnavailableError,
    WALError,
)
from ._ownership import Lease
from .store import ActorRow, EntryRow, SnapshotInfo, SnapshotRow, Store

__all__ = [
    "ActorStatus",
    "Call",
    "Decision",
    "Effect",
    "EntryView",
    "Event",
    "ExternalEffect",
    "Finding",
    "ForkRefusedError",
    "ForkResult",
    "History",
    "InDoubtIntent",
    "SnapshotView",
    "Step",
    "VerifyReport",
    "actor_status",
    "export",
    "fork",
    "fork_effects",
    "history",
    "iter_history",
    "leases",
    "list_actors",
    "opened",
    "resolve",
    "show",
    "to_json",
    "verify",
]

_CHUNK = 5_000
_MISSING: Any = object()

#: ``InDoubtIntent.state`` values that wait for an operator.
NEEDS_OPERATOR = ("in_doubt", "retry_interrupted")


class ForkRefusedError(ActorlogError):
    """A fork would repeat (or build on) external effects; pass ``yes=True`` to fork anyway."""

    def __init__(
        self, actor_id: str, at: int, effects: Sequence[ExternalEffect], warnings: Sequence[str]
    ) -> None:
        self.actor_id = actor_id
        self.at = at
        self.effects = list(effects)
        self.warnings = list(warnings)
        what = f"{len(self.effects)} external write effect(s)"
        if self.warnings:
            what += f" and {len(self.warnings)} unreadable entries"
        super().__init__(
            f"actor {actor_id!r} has {what} after seq {at} that already happened (or may have) "
            "in the original run; forking cannot undo them. Review them and fork with yes=True "
            "(actorlog fork --yes) to proceed"
        )


# -- models ------------------------------------------------------------------------------


@attrs.define
class InDoubtIntent:
    """A tool call of the unfinished step with no settled outcome.

    ``state``: ``in_doubt`` (escalated: waits for an operator), ``auto`` (its policy lets the
    runtime settle it on recovery: re-run, re-run with the same key, or reconcile),
    ``retry_authorized`` (an operator authorized a retry that has not started) or
    ``retry_interrupted`` (an authorized retry started and has no result: waits again).
    """

    intent_seq: int
    step_seq: int
    tool: str
    effect: str
    policy: str
    key: str
    args: list[Any]
    kwargs: dict[str, Any]
    at: float | None
    state: str

    @property
    def needs_operator(self) -> bool:
        return self.state in NEEDS_OPERATOR


@attrs.define
class ActorStatus:
    """One actor as the log describes it (see the module docstring for ``status``)."""

    actor_id: str
    actor_type: str
    status: str
    problem: str | None
    last_seq: int
    first_seq: int
    last_message_seq: int
    handled_seq: int
    pending_messages: int
    last_snapshot_seq: int | None
    last_snapshot_at: float | None
    in_doubt: list[InDoubtIntent]
    created_at: float


@attrs.define
class Decision:
    """An operator's ruling on an intent (or the runtime's marker that a retry started)."""

    seq: int
    action: str  # result | retry | fail | attempt
    by: str
    reason: str
    at: float | None
    value: Any = None
    error: dict[str, Any] | None = None
    #: a decision logged after the intent was already settled (only a store written before
    #: the one-decision rule holds one): replay ignores it
    ignored: bool = False


@attrs.define
class Call:
    """One tool call of a step: its intent and what settled it.

    ``status``: ``ok``, ``error`` (the tool raised), ``resolved`` (an operator supplied the
    result), ``failed_by_operator``, or, with no outcome yet, an :class:`InDoubtIntent` state
    (``in_doubt``, ``auto``, ``retry_authorized``, ``retry_interrupted``). The log cannot
    tell a call in doubt from one a live runtime is executing right now: "in doubt" means no
    outcome is recorded, and a runtime recovering the actor now would have to settle it.
    """

    intent_seq: int
    index: int
    tool: str
    effect: str
    policy: str
    args: list[Any]
    kwargs: dict[str, Any]
    key: str
    at: float | None
    status: str = "in_doubt"
    result_seq: int | None = None
    value: Any = None
    error: dict[str, Any] | None = None
    duration: float | None = None
    attempts: int = 1
    settled_by: str | None = None
    decisions: list[Decision] = attrs.Factory(list)
    #: the key in the intent entry when the call ran with another: a fork settling a copied
    #: intent runs it with a key derived from its own id (``key``)
    recorded_key: str | None = None


@attrs.define
class Effect:
    """A journaled non-tool effect: ``now``, ``random``, ``uuid``, ``send``, ``spawn``."""

    seq: int
    index: int
    name: str
    value: Any
    at: float | None


@attrs.define
class Step:
    """The handling of one message.

    ``status``: ``ok``, ``error`` (the handler raised), ``in_doubt`` (waits for an operator),
    ``running`` (started, not finished) or ``pending`` (not started).
    """

    message_seq: int
    message_id: str | None
    message_type: str
    body: Any
    sender: str | None
    received_at: float | None
    calls: list[Call] = attrs.Factory(list)
    effects: list[Effect] = attrs.Factory(list)
    status: str = "pending"
    step_seq: int | None = None
    reply: Any = None
    error: dict[str, Any] | None = None
    duration: float | None = None
    finished_at: float | None = None

    @property
    def started_at(self) -> float | None:
        times = [c.at for c in self.calls if c.at is not None]
        times += [e.at for e in self.effects if e.at is not None]
        if times:
            return min(times)
        return self.finished_at if self.finished_at is not None else self.received_at


@attrs.define
class SnapshotView:
    seq: int
    handled_seq: int
    type_tag: str
    schema_version: int
    size: int
    created_at: float
    digest: str
    valid: bool
    problem: str | None = None


@attrs.define
class Event:
    """An operator-history event from the store (recovery, quarantine, resolution, ...)."""

    at: float
    kind: str
    detail: dict[str, Any]


@attrs.define
class Finding:
    """One piece of damage. ``where``: ``entry``, ``snapshot`` or ``actor`` (its summary row).
    ``check``: ``checksum``, ``seq chain``, ``identity``, ``kind``, ``decode``, ``reference``,
    ``digest``, ``summary``."""

    actor_id: str
    where: str
    seq: int
    check: str
    detail: str
    at: float | None = None


@attrs.define
class History:
    """An actor's timeline: steps (by message), snapshots, events and damage found."""

    actor: ActorStatus
    steps: list[Step]
    snapshots: list[SnapshotView]
    events: list[Event]
    damage: list[Finding]
    since: int = 0

    def timeline(self) -> list[Step | SnapshotView | Event | Finding]:
        """Everything in one list, in time order (steps by when they started)."""
        keyed: list[tuple[float, int, int, Step | SnapshotView | Event | Finding]] = []
        for s in self.steps:
            keyed.append((s.started_at or 0.0, s.message_seq, 0, s))
        for snap in self.snapshots:
            keyed.append((snap.created_at, snap.seq, 1, snap))
        for i, e in enumerate(self.events):
            keyed.append((e.at, i, 2, e))
        for f in self.damage:
            keyed.append((f.at or 0.0, f.seq, 3, f))
        keyed.sort(key=lambda k: (k[0], k[2], k[1]))
        return [k[3] for k in keyed]


@attrs.define
class EntryView:
    """One entry in full. ``related``: the entries that refer to it or it refers to."""

    actor_id: str
    seq: int
    kind: str
    type_tag: str
    ref: int
    message_id: str | None
    checksum: int
    computed_checksum: int
    valid: bool
    problem: str | None
    size: int
    payload: Any
    related: list[dict[str, Any]]


@attrs.define
class VerifyReport:
    actors: int = 0
    entries: int = 0
    snapshots: int = 0
    findings: list[Finding] = attrs.Factory(list)
    #: what this check cannot see in this kind of store (the store's ``verify_limits``)
    limits: list[str] = attrs.Factory(list)

    @property
    def ok(self) -> bool:
        return not self.findings


@attrs.define
class ExternalEffect:
    """A write effect in the original run after a fork point.

    ``kind``: ``tool`` (a write tool call) or ``send`` (a message to another actor).
    ``outcome``: ``ok``, ``error``, ``resolved`` (an operator said it happened) or
    ``in_doubt``. ``repeated_by_fork``: its step's message is in the fork, so running the fork
    will make this call again (under a new idempotency key).
    """

    seq: int
    step_seq: int
    kind: str
    name: str
    args: list[Any]
    kwargs: dict[str, Any]
    key: str | None
    outcome: str
    outcome_seq: int | None
    at: float | None
    repeated_by_fork: bool


@attrs.define
class ForkResult:
    actor_id: str
    source_id: str
    at: int
    entries_copied: int
    snapshot_seq: int | None
    effects: list[ExternalEffect]
    warnings: list[str]


def to_json(obj: Any) -> Any:
    """A model (or a list of them) as plain JSON-ready data, derived properties included."""
    if isinstance(obj, list | tuple):
        return [to_json(o) for o in obj]
    if isinstance(obj, dict):
        return {k: to_json(v) for k, v in obj.items()}
    if attrs.has(type(obj)):
        d = {f.name: to_json(getattr(obj, f.name)) for f in attrs.fields(type(obj))}
        for name in _DERIVED.get(type(obj), ()):
            d[name] = to_json(getattr(obj, name))
        return d
    return obj


_DERIVED: dict[type, tuple[str, ...]] = {
    InDoubtIntent: ("needs_operator",),
    Step: ("started_at",),
    VerifyReport: ("ok",),
}


# -- opening -----------------------------------------------------------------------------


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
        # leaves aiosqlite's thread finishing after the event loop closed (a traceback).
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


# -- status ------------------------------------------------------------------------------


async def _actor_row(store: Store, actor_id: str) -> ActorRow:
    row = await store.get_actor(actor_id)
    if row is None:
        raise ActorNotFoundError(f"no actor {actor_id!r} in {store.url}")
    return row


def _intent_state(rec: Any) -> str | None:
    """The in-doubt state of a recorded intent, or None if its outcome is settled."""
    return _decisions.state(rec.outcomes, rec.payload.get("policy"))


def _fork_point(events: Sequence[Event]) -> int | None:
    """The seq this actor was forked at (its log up to it is a copy), or None."""
    for e in events:
        if e.kind == "forked":
            at = e.detail.get("at")
            return at if isinstance(at, int) and not isinstance(at, bool) else None
    return None


def _run_key(
    actor_id: str,
    fork_at: int | None,
    intent_seq: int,
    step_seq: int,
    payload: dict[str, Any],
    outcome_seq: int | None,
) -> str:
    """The idempotency key a call ran (or will run) with. The runtime derives it from the
    running actor's id, so a fork that settles a copied intent (one at or before the fork
    point, without an outcome in the copy) runs it with the fork's key, not the recorded one."""
    if (
        fork_at is not None
        and intent_seq <= fork_at
        and (outcome_seq is None or outcome_seq > fork_at)
    ):
        return idempotency_key(actor_id, step_seq, int(payload.get("index", 0)))
    return str(payload.get("key"))


def _failure(events: Sequence[Event]) -> str | None:
    """Why the last runtime stopped the actor, unless it has recovered since."""
    for i in range(len(events) - 1, -1, -1):
        e = events[i]
        if e.kind == "recovered":
            return None
        if e.kind in ("quarantined", "stopped"):
            err = e.detail.get("error") or e.detail.get("raw") or e.kind
            etype = e.detail.get("error_type")
            text = f"{etype}: {err}" if etype else str(err)
            if etype == "SequenceConflictError":
                text += _conflicting_operator_write(events[:i])
            return text
    return None


def _conflicting_operator_write(before: Sequence[Event]) -> str:
    """What an operator wrote offline since the runtime last recovered the actor: the likely
    other writer of a conflict (the runtime running the actor did not see it)."""
    for e in reversed(before):
        if e.kind == "recovered":
            return ""
        d = e.detail
        if e.kind == "resolved" and d.get("offline"):
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
        p = await _recovery.plan(
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
                    await store.read(row.actor_id, after_seq=row.handled_seq, kinds=("message",))
                )
    else:
        events = await _events(store, row.actor_id)
        fork_at = _fork_point(events)
        unfinished = [m for m in p.messages if m.step is None]
        pending = len(unfinished)
        if unfinished:
            m = unfinished[0]
            for rec in m.recorded:
                if rec.kind != "intent":
                    continue
                state = _intent_state(rec)
                if state is None:
                    continue
                pl = rec.payload
                in_doubt.append(
                    InDoubtIntent(
                        intent_seq=rec.seq,
                        step_seq=m.seq,
                        tool=rec.type_tag,
                        effect=str(pl.get("effect")),
                        policy=str(pl.get("policy")),
                        key=_run_key(row.actor_id, fork_at, rec.seq, m.seq, pl, None),
                        args=list(pl.get("args") or []),
                        kwargs=dict(pl.get("kwargs") or {}),
                        at=pl.get("at"),
                        state=state,
                    )
                )
        failure = _failure(events)
        if failure is not None:
            status, problem = "failed", failure
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


# -- reading entries ---------------------------------------------------------------------


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


def _check(row: EntryRow, actor_id: str) -> tuple[dict[str, Any] | None, CorruptEntryError | None]:
    """Verify a row at its own seq and decode it: (payload, None) or (None, error)."""
    try:
        _codec.verify_row(row, actor_id, row.seq)
        return _records.decode(row), None
    except CorruptEntryError as exc:
        return None, exc


async def _row_at(store: Store, actor_id: str, seq: int) -> EntryRow | None:
    rows = await store.read(actor_id, after_seq=seq - 1, upto_seq=seq)
    return rows[0] if rows else None


# -- history -----------------------------------------------------------------------------


class _Builder:
    """Folds verified entries into steps and calls."""

    def __init__(self, actor_id: str, fork_at: int | None = None) -> None:
        self.actor_id = actor_id
        self.fork_at = fork_at
        self.steps: dict[int, Step] = {}
        self.calls: dict[int, Call] = {}
        self.damage: list[Finding] = []
        self.damaged: set[int] = set()
        self.last_at: float | None = None

    def add(self, row: EntryRow) -> list[Step]:
        """Fold one entry in; return the steps it finished (handed over and forgotten)."""
        self._add(row)
        if row.kind != "step" or row.ref not in self.steps:
            return []
        step = self.steps[row.ref]
        if step.step_seq != row.seq:
            return []
        self.finish_keys(step)
        del self.steps[row.ref]
        for c in step.calls:
            self.calls.pop(c.intent_seq, None)
        return [step]

    def _add(self, row: EntryRow) -> None:
        p, err = _check(row, self.actor_id)
        if err is not None or p is None:
            assert err is not None
            self.damage.append(
                Finding(self.actor_id, "entry", row.seq, err.check, err.detail, self.last_at)
            )
            self.damaged.add(row.seq)
            return
        if row.ref in self.damaged:
            return  # what it belongs to is unreadable; the damage is already reported
        at = p.get("at")
        if isinstance(at, int | float):
            self.last_at = float(at)
        kind = row.kind
        if kind == "message":
            self.steps[row.seq] = Step(
                message_seq=row.seq,
                message_id=row.message_id,
                message_type=row.type_tag,
                body=p.get("body"),
                sender=p.get("sender"),
                received_at=at,
            )
            return
        if kind in ("intent", "effect", "step"):
            step = self.steps.get(row.ref)
            if step is None:
                self.damage.append(
                    Finding(
                        self.actor_id,
                        "entry",
                        row.seq,
                        "reference",
                        f"{kind} refers to message seq {row.ref}, which is not a message",
                        self.last_at,
                    )
                )
                return
            if kind == "intent":
                call = Call(
                    intent_seq=row.seq,
                    index=int(p.get("index", 0)),
                    tool=row.type_tag,
                    effect=str(p.get("effect")),
                    policy=str(p.get("policy")),
                    args=list(p.get("args") or []),
                    kwargs=dict(p.get("kwargs") or {}),
                    key=str(p.get("key")),
                    at=at,
                    status="in_doubt" if p.get("policy") == "escalate" else "auto",
                )
                step.calls.append(call)
                self.calls[row.seq] = call
            elif kind == "effect":
                step.effects.append(
                    Effect(row.seq, int(p.get("index", 0)), row.type_tag, p.get("value"), at)
                )
            else:
                step.step_seq = row.seq
                step.status = "ok" if p.get("ok") else "error"
                step.reply = p.get("reply")
                step.error = p.get("error")
                step.duration = p.get("duration")
                step.finished_at = at
            return
        owner = self.calls.get(row.ref)
        if owner is None:
            self.damage.append(
                Finding(
                    self.actor_id,
                    "entry",
                    row.seq,
                    "reference",
                    f"{kind} refers to intent seq {row.ref}, which is not an intent",
                    self.last_at,
                )
            )
            return
        if owner.result_seq is not None:  # settled: replay ignores later outcomes too
            if kind == "decision":
                owner.decisions.append(
                    Decision(
                        row.seq,
                        row.type_tag,
                        str(p.get("by", "")),
                        str(p.get("reason", "")),
                        at,
                        p.get("value"),
                        p.get("error"),
                        ignored=True,
                    )
                )
            return
        if kind == "result":
            owner.result_seq = row.seq
            owner.status = "ok" if p.get("ok") else "error"
            owner.value = p.get("value")
            owner.error = p.get("error")
            owner.duration = p.get("duration")
            owner.attempts = int(p.get("attempt", owner.attempts))
            owner.settled_by = str(p.get("settled_by", "run"))
        elif kind == "decision":
            d = Decision(
                seq=row.seq,
                action=row.type_tag,
                by=str(p.get("by", "")),
                reason=str(p.get("reason", "")),
                at=at,
                value=p.get("value"),
                error=p.get("error"),
            )
            owner.decisions.append(d)
            if d.action == "result":
                owner.status, owner.value, owner.settled_by = "resolved", d.value, "operator"
                owner.result_seq = row.seq
            elif d.action == "fail":
                owner.status, owner.error, owner.settled_by = (
                    "failed_by_operator",
                    d.error,
                    "operator",
                )
                owner.result_seq = row.seq
            elif d.action == "retry":
                owner.status = "retry_authorized"
            elif d.action == "attempt":
                owner.status = "retry_interrupted"
                owner.attempts += 1

    def finish_keys(self, step: Step) -> None:
        """In a fork: the keys its runtime ran copied calls with."""
        if self.fork_at is None:
            return
        for call in step.calls:
            key = _run_key(
                self.actor_id,
                self.fork_at,
                call.intent_seq,
                step.message_seq,
                {"key": call.key, "index": call.index},
                call.result_seq,
            )
            if key != call.key:
                call.key, call.recorded_key = key, call.key

    def finish(self, status: ActorStatus) -> None:
        """Unfinished steps: in doubt, running or pending."""
        doubt = {i.intent_seq: i.state for i in status.in_doubt}
        for step in self.steps.values():
            self.finish_keys(step)
        for step in self.steps.values():
            if step.step_seq is not None:
                continue
            for call in step.calls:
                if call.result_seq is None and call.intent_seq in doubt:
                    call.status = doubt[call.intent_seq]
            if any(c.status in NEEDS_OPERATOR for c in step.calls):
                step.status = "in_doubt"
            elif step.calls or step.effects:
                step.status = "running"


#: What :func:`iter_history` yields: the actor's status first, then the timeline.
HistoryItem = ActorStatus | Step | SnapshotView | Event | Finding


async def history(store: Store, actor_id: str, *, since: int = 0) -> History:
    """An actor's timeline. Damaged entries are reported (and skipped), not raised. Read in
    one consistent read (see :func:`verify`). Holds the whole timeline in memory: for a long
    log, :func:`iter_history` streams the same.

    With ``since``, only steps whose message was logged after seq ``since``, plus the steps
    still in progress at ``since`` (those with entries after it, read from their message).

    Raises:
        ActorNotFoundError: no such actor.
    """
    h: History | None = None
    async for item in iter_history(store, actor_id, since=since):
        if isinstance(item, ActorStatus):
            h = History(actor=item, steps=[], snapshots=[], events=[], damage=[], since=since)
        elif h is None:  # pragma: no cover - the status always comes first
            raise AssertionError("iter_history yields the status first")
        elif isinstance(item, Step):
            h.steps.append(item)
        elif isinstance(item, SnapshotView):
            h.snapshots.append(item)
        elif isinstance(item, Event):
            h.events.append(item)
        else:
            h.damage.append(item)
    assert h is not None
    h.steps.sort(key=lambda st: st.message_seq)
    return h


async def iter_history(
    store: Store, actor_id: str, *, since: int = 0
) -> AsyncGenerator[HistoryItem, None]:
    """:func:`history` as a stream: the :class:`ActorStatus` first, then steps, snapshots,
    events and damage in timeline order. Reads the log in pages by seq and holds only the
    steps still open, so a long log takes little memory; with ``since`` it reads only the
    entries after ``since`` and those of the steps in progress at it.

    Raises:
        ActorNotFoundError: no such actor (before anything is yielded).
    """
    async with _reading(store) as (view, _):
        async for item in _history_stream(view, actor_id, since):
            yield item


class _Side:
    """Snapshots and events (few) merged by time into the stream of steps."""

    def __init__(self, snapshots: list[SnapshotView], events: list[Event], since: int) -> None:
        items: list[SnapshotView | Event] = [*snapshots, *events]
        self.items = sorted(items, key=lambda i: (_sort_time(_at(i)), isinstance(i, Event)))
        self.since = since
        #: with ``since``: events before the first step shown are left out
        self.first: float | None = None

    def before(self, t: float) -> list[SnapshotView | Event]:
        out: list[SnapshotView | Event] = []
        while self.items and _sort_time(_at(self.items[0])) < t:
            item = self.items.pop(0)
            if self._shown(item):
                out.append(item)
        return out

    def rest(self) -> list[SnapshotView | Event]:
        out = [i for i in self.items if self._shown(i)]
        self.items = []
        return out

    def _shown(self, item: SnapshotView | Event) -> bool:
        if self.since == 0 or isinstance(item, SnapshotView):
            return True
        return self.first is not None and _sort_time(item.at) >= self.first


def _at(item: SnapshotView | Event) -> float | None:
    return item.created_at if isinstance(item, SnapshotView) else item.at


async def _history_stream(store: Store, actor_id: str, since: int) -> AsyncIterator[HistoryItem]:
    row = await _actor_row(store, actor_id)
    status = await _status(store, row)
    yield status
    events = await _events(store, actor_id)
    snapshots = [s for s in await _snapshot_views(store, actor_id, row.last_seq) if s.seq > since]
    side = _Side(snapshots, events, since)
    b = _Builder(actor_id, _fork_point(events))

    def emit(done: list[Step]) -> list[HistoryItem]:
        out: list[HistoryItem] = list(b.damage)
        b.damage.clear()
        for st in done:
            t = _sort_time(st.started_at)
            if side.first is None:
                side.first = t
            out += side.before(t)
            out.append(st)
        return out

    if since > 0:
        # the steps in progress at ``since``: their messages, and what refers to them
        need: set[int] = set()
        intents: set[int] = set()
        async for r in _scan(store, actor_id, after=since):
            if r.kind in ("intent", "effect", "step") and r.ref <= since:
                need.add(r.ref)
            elif r.kind in ("result", "decision") and r.ref <= since:
                intents.add(r.ref)
        for seq in sorted(intents):
            intent = await _row_at(store, actor_id, seq)
            if intent is not None and intent.kind == "intent" and intent.ref <= since:
                need.add(intent.ref)
        if need:
            async for r in _scan(store, actor_id, after=min(need) - 1, upto=since):
                if r.kind == "message":
                    wanted = r.seq in need
                elif r.kind in ("intent", "effect", "step"):
                    wanted = r.ref in need
                else:
                    wanted = r.ref in b.calls
                if wanted and ((done := b.add(r)) or b.damage):
                    for item in emit(done):
                        yield item
    expected: int | None = None
    last = since
    async for r in _scan(store, actor_id, after=since):
        if expected is not None and r.seq > expected:
            b.damage.append(
                Finding(
                    actor_id,
                    "entry",
                    expected,
                    "seq chain",
                    f"seqs {expected}..{r.seq - 1} are missing",
                    b.last_at,
                )
            )
            b.damaged.update(range(expected, r.seq))
        expected = r.seq + 1
        last = r.seq
        if (done := b.add(r)) or b.damage:
            for item in emit(done):
                yield item
    if expected is not None and last < row.last_seq:
        b.damage.append(
            Finding(
                actor_id,
                "entry",
                last + 1,
                "seq chain",
                f"log ends at seq {last}, the actor's summary says {row.last_seq}",
                b.last_at,
            )
        )
    b.finish(status)
    for item in emit(sorted(b.steps.values(), key=lambda st: st.message_seq)):
        yield item
    if side.first is None and since > 0:  # no step shown: events since entry ``since``
        at_row = await _row_at(store, actor_id, since)
        p, _ = (None, None) if at_row is None else _check(at_row, actor_id)
        side.first = float((p or {}).get("at") or 0.0) if at_row is not None else float("inf")
    for item in side.rest():
        yield item


def _sort_time(t: float | None) -> float:
    """A time to order by; damage (None, NaN) sorts first."""
    if t is None or not isinstance(t, int | float) or t != t:
        return 0.0
    return float(t)


async def _snapshot_views(store: Store, actor_id: str, last_seq: int) -> list[SnapshotView]:
    out = []
    for info in await store.list_snapshots(actor_id):
        problem = await _snapshot_problem(store, info, last_seq)
        out.append(
            SnapshotView(
                seq=info.seq,
                handled_seq=info.handled_seq,
                type_tag=info.type_tag,
                schema_version=info.schema_version,
                size=info.size,
                created_at=info.created_at,
                digest=info.digest.hex(),
                valid=problem is None,
                problem=problem,
            )
        )
    return out


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
        json.loads(snap.data)
    except ValueError as exc:
        return f"undecodable: {exc}"
    return None


# -- show --------------------------------------------------------------------------------


async def show(store: Store, actor_id: str, seq: int) -> EntryView:
    """One entry in full, decoded, with its checksum checked and its related entries.

    Raises:
        ActorNotFoundError: no such actor, or no entry at ``seq``.
    """
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
    payload, err = _check(row, actor_id)
    if payload is None:
        try:
            payload = json.loads(row.payload)
        except ValueError:
            payload = {"payload_b64": base64.b64encode(row.payload).decode()}
    related: list[dict[str, Any]] = []

    def rel(r: EntryRow, how: str) -> None:
        related.append({"seq": r.seq, "kind": r.kind, "type_tag": r.type_tag, "relation": how})

    if row.kind == "message":
        for kind in ("intent", "effect", "step"):
            for r in await store.find_ref(actor_id, kind, row.seq):
                rel(r, f"{kind} of this message's step")
    elif row.kind == "intent":
        msg = await _row_at(store, actor_id, row.ref)
        if msg is not None:
            rel(msg, "message of its step")
        for kind in ("result", "decision"):
            for r in await store.find_ref(actor_id, kind, row.seq):
                rel(r, f"{kind} of this intent")
    elif row.kind in ("effect", "step"):
        msg = await _row_at(store, actor_id, row.ref)
        if msg is not None:
            rel(msg, "message of its step")
    elif row.kind in ("result", "decision"):
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


# -- verify ------------------------------------------------------------------------------

Progress = Callable[[str, int, int], None]


async def verify(
    store: Store, actor_id: str | None = None, *, progress: Progress | None = None
) -> VerifyReport:
    """Check every entry's checksum, the seq chain, references between entries, each actor's
    summary row and every snapshot's digest. Damage is returned as findings, not raised.

    Safe on a live store: each actor is read in one consistent read (the store's optional
    ``reading()``: one SQLite read transaction, one PostgreSQL REPEATABLE READ transaction),
    so a runtime appending meanwhile is never reported as damage.

    Args:
        actor_id: check only this actor.
        progress: called as ``progress(actor_id, entries_done, entries_total)`` every chunk.

    Raises:
        ActorNotFoundError: ``actor_id`` does not exist.
        StoreUnavailableError: the store could not be read.
    """
    actors = await store.list_actors()  # lenient: a damaged summary row is a finding
    if actor_id is not None:
        actors = [a for a in actors if a.actor_id == actor_id]
        if not actors:
            raise ActorNotFoundError(f"no actor {actor_id!r} in {store.url}")
    total = sum(max(0, a.last_seq - a.first_seq + 1) for a in actors if a.last_seq)
    report = VerifyReport(limits=[str(x) for x in getattr(store, "verify_limits", ())])
    done = 0

    def tick(aid: str, n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(aid, done, max(total, done))

    for listed in actors:
        async with _reading(store) as (view, consistent):
            # the row again inside the consistent read (the listing may be older)
            a = listed if listed.damage is not None else await view.get_actor(listed.actor_id)
            if a is None:  # pragma: no cover - actors are never deleted
                continue
            await _verify_actor(view, a, consistent, report, tick)
    return report


async def _verify_actor(
    store: Store,
    a: ActorRow,
    consistent: bool,
    report: VerifyReport,
    tick: Callable[[str, int], None],
) -> None:
    report.actors += 1
    aid = a.actor_id
    if not _is_time(a.created_at):
        report.findings.append(
            Finding(aid, "actor", 0, "summary", f"created_at is not a time: {a.created_at!r}")
        )
    messages: set[int] = set()
    intents: set[int] = set()
    damaged: set[int] = set()  # no reference findings for what refers to these
    last_message = 0
    handled = 0
    expected = a.first_seq or 1
    after = 0
    if a.damage is not None:  # its summary row cannot be read: nothing to compare
        report.findings.append(Finding(aid, "actor", 0, "column type", a.damage))
    while True:
        bad: CorruptEntryError | None = None
        try:
            rows = await store.read(aid, after_seq=after, limit=_CHUNK)
        except CorruptEntryError as exc:  # a row the store could not even build
            bad, rows = exc, []
            if exc.seq > after + 1:  # the rows before it, then go on after it
                try:
                    rows = await store.read(aid, after_seq=after, upto_seq=exc.seq - 1)
                except CorruptEntryError:
                    rows = []
        for r in rows:
            report.entries += 1
            if r.seq != expected:
                report.findings.append(
                    Finding(
                        aid,
                        "entry",
                        expected,
                        "seq chain",
                        f"seqs {expected}..{r.seq - 1} are missing"
                        if r.seq > expected
                        else f"seq {r.seq} out of order",
                    )
                )
                damaged.update(range(expected, r.seq))
            expected = r.seq + 1
            _, err = _check(r, aid)
            if err is not None:
                report.findings.append(Finding(aid, "entry", r.seq, err.check, err.detail))
                damaged.add(r.seq)
                continue
            if r.ref in damaged:
                continue
            problem = None
            if r.kind == "message":
                messages.add(r.seq)
                last_message = r.seq
            elif r.kind in ("intent", "effect", "step"):
                if r.ref not in messages and r.ref >= (a.first_seq or 1):
                    problem = f"{r.kind} refers to seq {r.ref}, which is not an earlier message"
                if r.kind == "intent":
                    intents.add(r.seq)
                if r.kind == "step":
                    handled = max(handled, r.ref)
            elif r.ref not in intents and r.ref >= (a.first_seq or 1):
                problem = f"{r.kind} refers to seq {r.ref}, which is not an earlier intent"
            if problem is not None:
                report.findings.append(Finding(aid, "entry", r.seq, "reference", problem))
        tick(aid, len(rows))
        if bad is not None:
            report.findings.append(Finding(aid, "entry", bad.seq, bad.check, bad.detail))
            damaged.add(bad.seq)
            if bad.seq <= max(after, expected - 1):
                break
            after, expected = bad.seq, bad.seq + 1
            continue
        if len(rows) < _CHUNK:
            break
        after = rows[-1].seq
    log_end = expected - 1
    summary: ActorRow | None = a
    if not consistent and log_end != a.last_seq:
        # no consistent read: a runtime may have appended while the log was scanned; only a
        # summary that still disagrees when read again after the scan is damage
        again = await store.get_actor(aid)
        if again is not None and a.last_seq <= log_end <= again.last_seq:
            summary = again if again.last_seq == log_end else None
    if a.damage is not None or summary is None:
        pass  # damaged, or still being written: the summary cannot be compared
    elif log_end != summary.last_seq:
        report.findings.append(
            Finding(
                aid,
                "actor",
                summary.last_seq,
                "seq chain",
                f"the log ends at seq {log_end} but the actor's summary says {summary.last_seq}",
            )
        )
    elif (summary.last_message_seq, summary.handled_seq) != (last_message, handled):
        report.findings.append(
            Finding(
                aid,
                "actor",
                0,
                "summary",
                f"summary says last message {summary.last_message_seq}, handled "
                f"{summary.handled_seq}; the log says {last_message}, {handled}",
            )
        )
    for info in await store.list_snapshots(aid):
        report.snapshots += 1
        snap_problem = await _snapshot_problem(store, info, max(a.last_seq, log_end))
        if snap_problem == "missing" and not consistent:
            continue  # deleted by the runtime between listing and loading
        if snap_problem is None and not _is_time(info.created_at):
            snap_problem = f"created_at is not a time: {info.created_at!r}"
        if snap_problem is not None:
            report.findings.append(
                Finding(
                    aid,
                    "snapshot",
                    info.seq,
                    "digest" if "digest" in snap_problem or "size" in snap_problem else "snapshot",
                    snap_problem,
                )
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


def _is_time(value: object) -> bool:
    """A stored Unix time that damage has not made NaN or infinite."""
    return isinstance(value, int | float) and math.isfinite(value)


# -- resolve -----------------------------------------------------------------------------


def _whoami() -> str:
    try:
        user = getpass.getuser()
    except Exception:
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


async def resolve(
    store: Store,
    actor_id: str,
    intent_seq: int,
    *,
    result: Any = _MISSING,
    retry: bool = False,
    fail: str | None = None,
    by: str | None = None,
    reason: str = "",
) -> Decision:
    """Settle an in-doubt tool call offline, by appending an operator ``decision`` entry.

    Exactly one of ``result=`` (the call happened and returned this), ``retry=True`` (run it
    again, once) or ``fail="why"`` (it did not happen; ``ctx.call`` raises ``ToolCallError``
    in the handler). Who (``by``, default ``user@host``), when and why (``reason``) are
    recorded in the entry and in the operator history. The runtime acts on the decision when
    it next recovers the actor (on start, since the actor has unfinished work). A runtime that
    is running the actor right now does not see it: use ``ActorSystem.resolve`` there, or
    restart that runtime.

    Raises:
        ConfigurationError: not exactly one of the three, or the intent is not in doubt.
        ActorNotFoundError: no such actor.
        SequenceConflictError: a runtime appended to the actor meanwhile; nothing written.
    """
    chosen = [result is not _MISSING, bool(retry), fail is not None]
    if sum(chosen) != 1:
        raise ConfigurationError("pass exactly one of result=..., retry=True, fail='why'")
    row = await _actor_row(store, actor_id)
    status = await _status(store, row)
    if status.status == "quarantined":
        raise ConfigurationError(
            f"actor {actor_id!r} cannot recover, so a decision would not help: "
            f"{status.problem}. Run 'actorlog verify' and deal with the damage first"
        )
    listed = ", ".join(f"{i.intent_seq} ({i.tool}, {i.state})" for i in status.in_doubt)
    head = (
        f"actor {actor_id!r} has no unsettled intent at seq {intent_seq} "
        f"(unsettled: {listed or 'none'})"
    )
    await _decisions.check_decidable(store, actor_id, intent_seq, head=head)
    target = next((i for i in status.in_doubt if i.intent_seq == intent_seq), None)
    if target is None:
        raise ConfigurationError(head + ": its step is finished or not the one in progress")
    if target.state == "retry_authorized":
        raise ConfigurationError(
            f"intent seq {intent_seq} already has a retry authorized; the runtime runs it on "
            "recovery"
        )
    who = by or _whoami()
    if result is not _MISSING:
        payload = _records.decision_payload(
            action="result",
            value=_codec.to_plain(result, "resolved result"),
            by=who,
            reason=reason,
        )
    elif retry:
        payload = _records.decision_payload(action="retry", by=who, reason=reason)
    else:
        payload = _records.decision_payload(
            action="fail",
            error={"type": "OperatorFailed", "message": str(fail)},
            by=who,
            reason=reason or str(fail),
        )
    action = str(payload["action"])
    last = status.last_seq
    data = _codec.encode_plain(payload, "decision entry")
    entry = _codec.make_row(actor_id, last + 1, "decision", action, intent_seq, None, data)
    await store.append(actor_id, last, [entry])
    with contextlib.suppress(Exception):  # history is best effort; the log is the truth
        await store.record_event(
            actor_id,
            "resolved",
            json.dumps(
                {
                    "intent_seq": intent_seq,
                    "decision_seq": entry.seq,
                    "action": action,
                    "tool": target.tool,
                    "by": who,
                    "reason": payload["reason"],
                    "offline": True,
                }
            ),
        )
    return Decision(
        seq=entry.seq,
        action=action,
        by=who,
        reason=str(payload["reason"]),
        at=payload["at"],
        value=payload.get("value"),
        error=payload.get("error"),
    )


# -- fork --------------------------------------------------------------------------------


async def fork_effects(
    store: Store, actor_id: str, at: int
) -> tuple[list[ExternalEffect], list[str]]:
    """The external write effects after seq ``at`` that already happened (or may have) in
    ``actor_id``'s run, and warnings about entries after ``at`` that could not be read.

    Listed: write tool calls whose outcome is after ``at`` (ok, error, resolved by an operator,
    or still in doubt) and messages sent to other actors after ``at``. Not listed: reads,
    calls an operator ruled did not happen.
    """
    await _actor_row(store, actor_id)
    intents: dict[int, tuple[EntryRow, dict[str, Any]]] = {}
    effects: dict[int, ExternalEffect] = {}
    warnings: list[str] = []
    settled: set[int] = set()  # write intents with any outcome
    async for r in _scan(store, actor_id):
        p, err = _check(r, actor_id)
        if err is not None or p is None:
            if r.seq > at:
                warnings.append(str(err))
            continue
        if r.kind == "intent":
            if p.get("effect") == "write":
                intents[r.seq] = (r, p)
                if r.seq > at:
                    effects[r.seq] = _external(r, p, at, "in_doubt", None)
        elif r.kind == "effect" and r.type_tag == "send" and r.seq > at:
            v = p.get("value") or {}
            effects[r.seq] = ExternalEffect(
                seq=r.seq,
                step_seq=r.ref,
                kind="send",
                name=str(v.get("target")),
                args=[v.get("message_type")],
                kwargs={},
                key=v.get("message_id"),
                outcome="ok",
                outcome_seq=r.seq,
                at=p.get("at"),
                repeated_by_fork=r.ref <= at,
            )
        elif r.kind in ("result", "decision") and r.ref in intents:
            settled.add(r.ref)
            if r.seq <= at:
                continue
            irow, ip = intents[r.ref]
            if r.kind == "result":
                outcome = "ok" if p.get("ok") else "error"
            elif r.type_tag == "result":
                outcome = "resolved"
            elif r.type_tag == "fail":
                effects.pop(irow.seq, None)
                continue
            else:
                continue  # retry / attempt: still in doubt
            effects[irow.seq] = _external(irow, ip, at, outcome, r.seq)
    for seq, (irow, ip) in intents.items():  # in doubt since before the fork point
        if seq <= at and seq not in settled:
            effects[seq] = _external(irow, ip, at, "in_doubt", None)
    return [effects[k] for k in sorted(effects)], warnings


async def _saved_options(store: Store, actor_id: str) -> str | None:
    """The spawn options last saved for ``actor_id`` (an undamaged ``options`` event whose
    detail is a JSON object, as the runtime reads them), as saved; None if there are none."""
    saved = None
    for ev in await store.read_events(actor_id):
        if ev.kind == "options" and ev.damage is None:
            try:
                value = json.loads(ev.detail)
            except ValueError:
                continue
            if isinstance(value, dict):
                saved = ev.detail
    return saved


def _external(
    r: EntryRow, p: dict[str, Any], at: int, outcome: str, outcome_seq: int | None
) -> ExternalEffect:
    return ExternalEffect(
        seq=r.seq,
        step_seq=r.ref,
        kind="tool",
        name=r.type_tag,
        args=list(p.get("args") or []),
        kwargs=dict(p.get("kwargs") or {}),
        key=p.get("key"),
        outcome=outcome,
        outcome_seq=outcome_seq,
        at=p.get("at"),
        repeated_by_fork=r.ref <= at,
    )


async def fork(
    store: Store,
    actor_id: str,
    *,
    at: int,
    new_id: str,
    yes: bool = False,
    by: str | None = None,
) -> ForkResult:
    """Create actor ``new_id`` as ``actor_id`` would be had it crashed right after seq ``at``.

    Entries 1..``at`` are copied under the new id with fresh checksums (after verifying
    every one: damage is never laundered into a valid-looking copy), and the newest valid
    snapshot at or before ``at`` is copied too, so recovery replays only the tail. Running
    the fork (``system.spawn(cls, new_id)``) finishes any step that was in progress at ``at``
    and handles the messages logged by then; tool calls it makes get idempotency keys derived
    from the new id.

    Raises:
        ForkRefusedError: there are external effects after ``at`` (see :func:`fork_effects`)
            and ``yes`` is false. Nothing was written.
        ConfigurationError: bad ``at`` or ``new_id``, or ``new_id`` already has a log.
        CorruptEntryError: an entry in 1..``at`` is damaged.
        SequenceConflictError: someone wrote ``new_id`` meanwhile.
    """
    _codec.validate_actor_id(new_id)
    if new_id == actor_id:
        raise ConfigurationError("the fork needs a new actor id")
    src = await _actor_row(store, actor_id)
    if not 1 <= at <= src.last_seq:
        raise ConfigurationError(
            f"--at must be between 1 and actor {actor_id!r}'s last seq {src.last_seq}, not {at}"
        )
    if src.first_seq > 1:
        raise ConfigurationError(
            f"actor {actor_id!r}'s log starts at seq {src.first_seq} (compacted); it cannot be "
            "forked"
        )
    existing = await store.get_actor(new_id)
    if existing is not None and existing.last_seq > 0:
        raise ConfigurationError(
            f"actor {new_id!r} already exists with {existing.last_seq} entries"
        )
    rows: list[EntryRow] = []
    async for r in _scan(store, actor_id, upto=at):
        _codec.verify_row(r, actor_id, len(rows) + 1)
        _records.decode(r)
        rows.append(r)
    if len(rows) != at:
        raise CorruptEntryError(
            actor_id, len(rows) + 1, "seq chain", f"the log ends at seq {len(rows)}"
        )
    effects, warnings = await fork_effects(store, actor_id, at)
    if (effects or warnings) and not yes:
        raise ForkRefusedError(actor_id, at, effects, warnings)
    copies = [
        _codec.make_row(new_id, r.seq, r.kind, r.type_tag, r.ref, r.message_id, r.payload)
        for r in rows
    ]
    reg = await store.register_actor(new_id, src.actor_type)
    if reg.actor_type != src.actor_type:
        raise ConfigurationError(f"actor {new_id!r} exists with type {reg.actor_type}")
    await store.append(new_id, 0, copies)
    # the source's spawn options hold for the fork too (saved "for good": docs/tuning.md)
    options = await _saved_options(store, actor_id)
    if options is not None:
        await store.record_event(new_id, "options", options)
    snapshot_seq = None
    for info in await store.list_snapshots(actor_id):
        if info.seq > at or await _snapshot_problem(store, info, at) is not None:
            continue
        snap = await store.load_snapshot(actor_id, info.seq)
        if snap is None:
            continue
        new_info = attrs.evolve(info, actor_id=new_id, created_at=time.time())
        new_info = attrs.evolve(new_info, digest=_codec.info_digest(new_info, snap.data))
        with contextlib.suppress(Exception):  # without it recovery replays from seq 1
            await store.save_snapshot(SnapshotRow(info=new_info, data=snap.data))
            snapshot_seq = info.seq
        break
    who = by or _whoami()
    detail = {
        "source": actor_id,
        "at": at,
        "fork": new_id,
        "by": who,
        "external_effects": len(effects),
        "confirmed": yes,
    }
    with contextlib.suppress(Exception):
        await store.record_event(new_id, "forked", json.dumps(detail))
        await store.record_event(actor_id, "forked_to", json.dumps(detail))
    return ForkResult(
        actor_id=new_id,
        source_id=actor_id,
        at=at,
        entries_copied=len(copies),
        snapshot_seq=snapshot_seq,
        effects=effects,
        warnings=warnings,
    )


# -- export ------------------------------------------------------------------------------


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
        p, err = _check(r, actor_id)
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
        with_bytes = raw
        if p is None:
            try:
                p = json.loads(r.payload)
            except ValueError:
                with_bytes = True
        d["payload"] = p
        if with_bytes:
            d["payload_b64"] = base64.b64encode(r.payload).decode()
        yield d
    for info in await store.list_snapshots(actor_id):
        snap = await store.load_snapshot(actor_id, info.seq)
        problem = await _snapshot_problem(store, info, row.last_seq)
        state: Any = None
        if snap is not None:
            try:
                state = json.loads(snap.data)
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
