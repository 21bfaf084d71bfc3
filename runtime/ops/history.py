"""An actor's timeline: :func:`history`, and :func:`iter_history` that streams it."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from .._journal import codec as _codec
from .._journal.records import (
    DecisionAction,
    DecisionRecord,
    EffectRecord,
    EntryKind,
    ErrorInfo,
    EventKind,
    IntentRecord,
    MessageRecord,
    ResultRecord,
    StepRecord,
)
from ..store import EntryRow, Store
from .models import (
    NEEDS_OPERATOR,
    ActorStatus,
    Call,
    Decision,
    Effect,
    Event,
    Finding,
    History,
    HistoryItem,
    Ruling,
    SnapshotView,
    Step,
)
from .reads import (
    _actor_row,
    _check,
    _events,
    _fork_point,
    _reading,
    _row_at,
    _run_key,
    _scan,
    _snapshot_problem,
    _status,
)

#: the kinds that refer to a message, and those that refer to an intent
_STEP_KINDS = (EntryKind.INTENT, EntryKind.EFFECT, EntryKind.STEP)
_OUTCOME_KINDS = (EntryKind.RESULT, EntryKind.DECISION)


def _plain(error: ErrorInfo | None) -> dict[str, Any] | None:
    """An error as the views show it (``{"type": ..., "message": ...}``)."""
    return None if error is None else dict(error.payload())


def _decision(row: EntryRow, d: DecisionRecord, *, ignored: bool = False) -> Decision:
    return Decision(
        seq=row.seq,
        action=row.type_tag,
        by=d.by,
        reason=d.reason,
        at=d.at,
        value=d.value,
        error=_plain(d.error),
        ignored=ignored,
        attempt=d.attempt,
        delay=d.delay if d.action == DecisionAction.ATTEMPT_FAILED else None,
        in_doubt=d.in_doubt,
    )


class _Builder:
    """Folds verified entries into steps and calls."""

    def __init__(self, actor_id: str, fork_at: int | None = None, first_seq: int = 1) -> None:
        self.actor_id = actor_id
        self.fork_at = fork_at
        #: where the kept log starts: entries referring before it belong to compacted steps
        self.first_seq = first_seq
        #: intent seq -> the operator's ruling on it (``resolved`` events, ops/rulings.py)
        self.rulings: dict[int, Ruling] = {}
        self.steps: dict[int, Step] = {}
        self.calls: dict[int, Call] = {}
        self.damage: list[Finding] = []
        self.damaged: set[int] = set()
        self.last_at: float | None = None
        #: message seq -> the incarnation id its entry records ([F13], for fork keys)
        self.incarnations: dict[int, str | None] = {}

    def add(self, row: EntryRow) -> list[Step]:
        """Fold one entry in; return the steps it finished (handed over and forgotten)."""
        self._add(row)
        if row.kind != "step" or row.ref not in self.steps:
            return []
        step = self.steps[row.ref]
        if step.step_seq != row.seq:
            return []
        self.finish_keys(step)
        _overlaps(step)
        for c in step.calls:  # an operator's ruling on a cancelled write in doubt
            found = self.rulings.get(c.intent_seq) if c.in_doubt else None
            c.ruling = None if found is None else found.decision
        del self.steps[row.ref]
        self.incarnations.pop(row.ref, None)
        for c in step.calls:
            self.calls.pop(c.intent_seq, None)
        return [step]

    def report(self, seq: int, check: str, detail: str) -> None:
        """One damaged entry, found at the time of the last readable entry."""
        self.damage.append(Finding(self.actor_id, "entry", seq, check, detail, self.last_at))

    def _add(self, row: EntryRow) -> None:
        rec, err = _check(row, self.actor_id)
        if err is not None or rec is None:
            assert err is not None
            self.report(row.seq, err.check, err.detail)
            self.damaged.add(row.seq)
            return
        if row.ref in self.damaged:
            return  # what it belongs to is unreadable; the damage is already reported
        if 0 < row.ref < self.first_seq:
            return  # the rest of a step whose start was compacted away (FORMAT.md [F16])
        at = rec.at
        if at is not None:
            self.last_at = at
        if isinstance(rec, MessageRecord):
            self.incarnations[row.seq] = rec.incarnation
            self.steps[row.seq] = Step(
                message_seq=row.seq,
                message_id=row.message_id,
                message_type=row.type_tag,
                body=rec.body,
                sender=rec.sender,
                received_at=at,
                trace_id=_parent_trace(rec.trace),
            )
            return
        if isinstance(rec, IntentRecord | EffectRecord | StepRecord):
            step = self.steps.get(row.ref)
            if step is None:
                self.report(
                    row.seq,
                    "reference",
                    f"{row.kind} refers to message seq {row.ref}, which is not a message",
                )
                return
            if isinstance(rec, IntentRecord):
                call = Call(
                    intent_seq=row.seq,
                    index=rec.index,
                    tool=row.type_tag,
                    effect=rec.effect,
                    policy=rec.policy,
                    args=list(rec.args),
                    kwargs=dict(rec.kwargs),
                    key=rec.key,
                    at=at,
                    status="in_doubt" if rec.policy == "escalate" else "auto",
                    task=rec.task or None,
                )
                step.calls.append(call)
                self.calls[row.seq] = call
            elif isinstance(rec, EffectRecord):
                step.effects.append(
                    Effect(row.seq, rec.index, row.type_tag, rec.value, at, task=rec.task or None)
                )
            else:
                step.step_seq = row.seq
                step.status = "ok" if rec.ok else "error"
                step.reply = rec.reply
                step.error = _plain(rec.error)
                step.duration = rec.duration
                step.finished_at = at
                span = rec.span
                if isinstance(span, dict) and _hex(span.get("trace_id"), 32):
                    step.trace_id = span["trace_id"]
                    step.span_id = span["span_id"] if _hex(span.get("span_id"), 16) else None
            return
        owner = self.calls.get(row.ref)
        if owner is None:
            self.report(
                row.seq,
                "reference",
                f"{row.kind} refers to intent seq {row.ref}, which is not an intent",
            )
            return
        if owner.result_seq is not None:  # settled: replay ignores later outcomes too
            if isinstance(rec, DecisionRecord):
                owner.decisions.append(_decision(row, rec, ignored=True))
            return
        if isinstance(rec, ResultRecord):
            owner.result_seq, owner.ended_at = row.seq, at
            owner.status = "ok" if rec.ok else "error"
            owner.value = rec.value
            owner.error = _plain(rec.error)
            owner.duration = rec.duration
            owner.attempts = rec.attempt
            owner.settled_by = rec.settled_by
            owner.in_doubt = rec.in_doubt
            owner.reconciled = rec.reconciled
            owner.reconciled_value = rec.reconciled_value
        else:
            d = _decision(row, rec)
            owner.decisions.append(d)
            if d.action == DecisionAction.RESULT:
                owner.status, owner.value, owner.settled_by = "resolved", d.value, "operator"
                owner.result_seq, owner.ended_at = row.seq, at
            elif d.action == DecisionAction.FAIL:
                owner.status, owner.error, owner.settled_by = (
                    "failed_by_operator",
                    d.error,
                    "operator",
                )
                owner.result_seq, owner.ended_at = row.seq, at
            elif d.action == DecisionAction.RETRY:
                owner.status = "retry_authorized"
            elif d.action == DecisionAction.ATTEMPT:
                owner.status = "retry_interrupted"
                owner.attempts += 1
            elif d.action == DecisionAction.ATTEMPT_FAILED:
                owner.attempts = max(owner.attempts, d.attempt)

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
                call.index,
                call.key,
                call.result_seq,
                self.incarnations.get(step.message_seq),
                call.task or "",
            )
            if key != call.key:
                call.key, call.recorded_key = key, call.key

    def finish(self, status: ActorStatus) -> None:
        """Unfinished steps: in doubt, running or pending."""
        doubt = {i.intent_seq: i.state for i in status.in_doubt}
        for step in self.steps.values():
            self.finish_keys(step)
            _overlaps(step)
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


def _overlaps(step: Step) -> None:
    """Fill in each call's ``parallel_with``: two calls of a step ran at the same time when
    each was started (its intent logged) before the other's outcome was logged. Log order,
    not clocks: a step that awaited each call before the next never overlaps."""
    running: list[Call] = []  # started, outcome not logged yet (at the current intent)
    for call in sorted(step.calls, key=lambda c: c.intent_seq):
        call.parallel_with = []
        running = [c for c in running if c.result_seq is None or c.result_seq > call.intent_seq]
        for other in running:
            other.parallel_with.append(call.intent_seq)
            call.parallel_with.append(other.intent_seq)
        running.append(call)
    for call in step.calls:
        call.parallel_with.sort()


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


def ruling_of(ev: Event) -> Ruling | None:
    """The operator's ruling on a cancelled write in doubt that a ``resolved`` event records
    (``"ruling": true``; ops/rulings.py), or None."""
    d = ev.detail
    if ev.kind != EventKind.RESOLVED or d.get("ruling") is not True:
        return None
    seq, action = d.get("intent_seq"), d.get("action")
    if not isinstance(seq, int) or action not in ("result", "fail"):
        return None
    error = d.get("error")
    return Ruling(
        intent_seq=seq,
        decision=Decision(
            seq=0,
            action=action,
            by=str(d.get("by", "")),
            reason=str(d.get("reason", "")),
            at=ev.at,
            value=d.get("value"),
            error=error if isinstance(error, dict) else None,
        ),
    )


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
    _codec.validate_int(since, "since")
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
    b = _Builder(actor_id, _fork_point(events), first_seq=max(1, row.first_seq))
    for found in map(ruling_of, events):  # the first ruling on a call counts (_rulings)
        if found is not None:
            b.rulings.setdefault(found.intent_seq, found)

    def emit(done: list[Step]) -> list[HistoryItem]:
        out: list[HistoryItem] = list(b.damage)
        b.damage.clear()
        for st in done:
            t = _sort_time(st.placed_at)
            if side.first is None:
                side.first = min(t, _sort_time(st.started_at))
            out += side.before(t)
            out.append(st)
        return out

    if since > 0:
        # the steps in progress at ``since``: their messages, and what refers to them
        need: set[int] = set()
        intents: set[int] = set()
        async for r in _scan(store, actor_id, after=since):
            if r.kind in _STEP_KINDS and r.ref <= since:
                need.add(r.ref)
            elif r.kind in _OUTCOME_KINDS and r.ref <= since:
                intents.add(r.ref)
        for seq in sorted(intents):
            intent = await _row_at(store, actor_id, seq)
            if intent is not None and intent.kind == EntryKind.INTENT and intent.ref <= since:
                need.add(intent.ref)
        if need:
            async for r in _scan(store, actor_id, after=min(need) - 1, upto=since):
                if r.kind == EntryKind.MESSAGE:
                    wanted = r.seq in need
                elif r.kind in _STEP_KINDS:
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
            b.report(expected, "seq chain", f"seqs {expected}..{r.seq - 1} are missing")
            b.damaged.update(range(expected, r.seq))
        expected = r.seq + 1
        last = r.seq
        if (done := b.add(r)) or b.damage:
            for item in emit(done):
                yield item
    if expected is not None and last < row.last_seq:
        b.report(
            last + 1,
            "seq chain",
            f"log ends at seq {last}, the actor's summary says {row.last_seq}",
        )
    b.finish(status)
    for item in emit(sorted(b.steps.values(), key=lambda st: st.message_seq)):
        yield item
    if side.first is None and since > 0:  # no step shown: events since entry ``since``
        at_row = await _row_at(store, actor_id, since)
        rec, _ = (None, None) if at_row is None else _check(at_row, actor_id)
        at = None if rec is None else rec.at
        side.first = float(at or 0.0) if at_row is not None else float("inf")
    for item in side.rest():
        yield item


def _hex(value: object, digits: int) -> bool:
    """A valid OpenTelemetry id: ``digits`` lowercase hex digits, not all zero."""
    return (
        isinstance(value, str)
        and len(value) == digits
        and all(c in "0123456789abcdef" for c in value)
        and value.strip("0") != ""
    )


def _parent_trace(carrier: object) -> str | None:
    """The trace id in a message's stored W3C trace context (``traceparent``
    ``00-<trace id>-<span id>-<flags>``), or None."""
    if not isinstance(carrier, dict):
        return None
    parts = str(carrier.get("traceparent", "")).split("-")
    return parts[1] if len(parts) == 4 and _hex(parts[1], 32) else None


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
