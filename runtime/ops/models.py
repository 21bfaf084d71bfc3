"""What the operator API returns: one attrs class per view (an actor's status, its
history, one entry, a verify report, a fork), and :func:`to_json` for all of them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from .._journal.errors import ActorlogError

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


@attrs.define
class InDoubtIntent:
    """A tool call of the unfinished step with no settled outcome.

    ``state``: ``in_doubt`` (escalated: waits for an operator), ``auto`` (its policy lets the
    runtime settle it on recovery: re-run, re-run with the same key, or reconcile),
    ``retry_authorized`` (an operator authorized a retry that has not started) or
    ``retry_interrupted`` (an authorized retry of a write that escalates started and has no
    result: waits again; a read's or an idempotent write's interrupted attempt is ``auto``).
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
    #: the task of the step that made the call (see ``Call.task``); None: the handler's own
    task: str | None = None

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
    """An operator's ruling on an intent, the runtime's marker that a retry started, or a
    failed attempt of the tool's retry policy (``attempt_failed``)."""

    seq: int
    action: str  # result | retry | fail | attempt | attempt_failed
    by: str
    reason: str
    at: float | None
    value: Any = None
    error: dict[str, Any] | None = None
    #: a decision logged after the intent was already settled (only a store written before
    #: the one-decision rule holds one): replay ignores it
    ignored: bool = False
    #: ``attempt_failed`` (the runtime's retry policy): the attempt that failed, the
    #: back-off chosen before the next one (seconds), whether that attempt is in doubt
    attempt: int = 0
    delay: float | None = None
    in_doubt: bool = False


@attrs.define
class Call:
    """One tool call of a step: its intent and what settled it.

    ``status``: ``ok``, ``error`` (the tool raised), ``resolved`` (an operator supplied the
    result), ``failed_by_operator``, or, with no outcome yet, an :class:`InDoubtIntent` state
    (``in_doubt``, ``auto``, ``retry_authorized``, ``retry_interrupted``). The log cannot
    tell a call in doubt from one a live runtime is executing right now: "in doubt" means no
    outcome is recorded, and a runtime recovering the actor now would have to settle it.

    A call made by a task the step's handler started (FORMAT.md [F18]) has its ``task``
    path (``"0"``, ``"1.2"``); the handler's own calls have None. ``at`` is when it started
    (its intent was logged), ``ended_at`` when its outcome was (None while it has none), and
    ``parallel_with`` the intent seqs of the calls of the same step that ran at the same time
    (each started before the other's outcome was logged: log order, not clocks). ``index``
    counts the effects of its task.
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
    #: intent runs it with a key derived from its own id and incarnation (``key``)
    recorded_key: str | None = None
    #: the task of the step that made the call: its spawn path, dot-joined (``"0"``, the
    #: handler's first task; ``"1.2"``, the third task that its second task started); None:
    #: the handler's own task (shown as "handler")
    task: str | None = None
    #: when the call's outcome was logged (the result, or the operator's ``result``/``fail``
    #: decision); None while it has none. ``at`` is when it started (its intent).
    ended_at: float | None = None
    #: the intent seqs of the other calls of the same step that ran at the same time as this
    #: one: each started before the other's outcome was logged (by log order, not by clock;
    #: a call with no outcome yet runs on). Empty: it ran alone.
    parallel_with: list[int] = attrs.Factory(list)
    #: a write the handler's own scope cancelled while its tool ran (``settled_by``
    #: ``cancelled``) and whose policy escalates: it may or may not have taken effect. The
    #: step went on; an operator rules on what happened (``needs_ruling``, docs/operators.md)
    in_doubt: bool = False
    #: such a write's reconcile answer, asked when it was cancelled: ``happened`` (with
    #: ``reconciled_value``, the result it gave) or ``not_happened``; None: not asked
    reconciled: str | None = None
    reconciled_value: Any = None
    #: the operator's ruling on it (``resolve``; ``seq`` 0: it is in the operator history,
    #: not the log), filled in by :func:`history` (not by ``iter_history``)
    ruling: Decision | None = None

    @property
    def needs_ruling(self) -> bool:
        """A cancelled write in doubt with no operator ruling yet."""
        return self.in_doubt and self.ruling is None


@attrs.define
class Ruling:
    """An operator's ruling on a cancelled write in doubt (ops/rulings.py)."""

    intent_seq: int
    decision: Decision


@attrs.define
class Effect:
    """A journaled non-tool effect: ``now``, ``random``, ``uuid``, ``send``, ``spawn``;
    ``task``: the task of the step that made it, as ``Call.task``."""

    seq: int
    index: int
    name: str
    value: Any
    at: float | None
    #: the task of the step that made it (see ``Call.task``); None: the handler's own
    task: str | None = None


@attrs.define
class Step:
    """The handling of one message.

    ``status``: ``ok``, ``error`` (the handler raised), ``in_doubt`` (waits for an operator),
    ``running`` (started, not finished) or ``pending`` (not started). ``concurrent``: tasks
    it started made effects, or two of its calls overlapped (``Call.parallel_with``).
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
    #: the OpenTelemetry trace the step ran in (32 hex digits): its own span's, recorded with
    #: the step; before the step is logged, the trace of the message's sender (the step's
    #: span joins it). None when no tracing was configured.
    trace_id: str | None = None
    #: the step span's id (16 hex digits), once the step is logged with one
    span_id: str | None = None

    @property
    def concurrent(self) -> bool:
        """True when tasks of the step made effects, or two of its calls overlapped."""
        return any(c.task is not None or c.parallel_with for c in self.calls) or any(
            e.task is not None for e in self.effects
        )

    @property
    def placed_at(self) -> float | None:
        """Where the step sits in a timeline, in log order: when it finished (its last
        entry; a recovery or decision that resumed it comes before), else when it started."""
        return self.finished_at if self.finished_at is not None else self.started_at

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
    """One piece of damage. ``where``: ``entry``, ``snapshot``, ``actor`` (its summary row;
    with check ``integrity``, its rows the database engine cannot read) or ``store`` (the
    database engine's own check of the store's files; ``actor_id`` is empty). ``check``:
    ``checksum``, ``seq chain``, ``identity``, ``kind``, ``decode``, ``reference``,
    ``message id``, ``digest``, ``summary``, ``integrity``."""

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
        """Everything in one list, in log order (a step where it finished, or started if
        it has not finished; see :attr:`Step.placed_at`)."""
        keyed: list[tuple[float, int, int, Step | SnapshotView | Event | Finding]] = []
        for s in self.steps:
            keyed.append((s.placed_at or 0.0, s.message_seq, 0, s))
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
    #: the decoded payload: a JSON object with its field names (a format-2 compact payload,
    #: FORMAT.md [F19], is shown as its fields), or ``{"payload_b64": ...}``
    payload: Any
    related: list[dict[str, Any]]


@attrs.define
class VerifyReport:
    actors: int = 0
    entries: int = 0
    snapshots: int = 0
    findings: list[Finding] = attrs.Factory(list)
    #: actor id -> the seq its compacted log starts at (a verified log start record: the
    #: entries before it were removed by compaction, which is not damage)
    compacted: dict[str, int] = attrs.Factory(dict)
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
class ActorPage:
    """One page of :func:`list_actors_page`: the actors on it with their status, and what is
    known about all the actors that match the filters.

    ``total`` is the number of matching actors, or None when a status filter was given and
    the scan stopped once the page was full (a status needs the actor's log read; see
    :func:`list_actors_page`). ``next_offset`` is where the next page starts (pass it as
    ``offset``), None on the last page.
    """

    actors: list[ActorStatus]
    total: int | None
    offset: int
    next_offset: int | None
    #: every actor in the store, before filtering
    actors_in_store: int
    #: actors (matching the class and id filters) with messages logged but not yet handled:
    #: the only ones that can be ``running`` or ``in_doubt``
    with_pending_work: int
    #: the statuses of the actors with pending work, when there are at most
    #: ``status_limit`` of them (else None); the others have no pending work
    status_counts: dict[str, int] | None
    #: actor classes in the store with their number of actors, by name
    classes: dict[str, int]


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
    Call: ("needs_ruling",),
    Step: ("started_at", "concurrent"),
    VerifyReport: ("ok",),
}

#: What :func:`iter_history` yields: the actor's status first, then the timeline.
HistoryItem = ActorStatus | Step | SnapshotView | Event | Finding
