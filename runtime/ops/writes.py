"""The operator's two writes: :func:`resolve` an in-doubt tool call, :func:`fork` an actor.

Both write only through the store's conditional append, so they can never interleave with a
runtime's writes: if a runtime appends to the same actor first, they raise
``SequenceConflictError`` and write nothing."""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any

import attrs

from .._durability import decisions as _decisions
from .._journal import codec as _codec, records as _records
from .._journal.errors import ConfigurationError, CorruptEntryError
from .._journal.records import (
    DecisionAction,
    EffectRecord,
    EntryKind,
    EventKind,
    IntentRecord,
    ResultRecord,
    decode_entry,
)
from ..store import EntryRow, SnapshotRow, Store
from .models import (
    ActorStatus,
    Decision,
    ExternalEffect,
    ForkRefusedError,
    ForkResult,
)
from .reads import (
    _actor_row,
    _check,
    _scan,
    _snapshot_problem,
    _status,
)
from .rulings import check_ruling, record_ruling
from .verify import refuse_damaged


async def resolve(
    store: Store,
    actor_id: str,
    intent_seq: int,
    *,
    result: Any = _decisions.MISSING,
    retry: bool = False,
    fail: str | None = None,
    by: str | None = None,
    reason: str = "",
) -> Decision:
    """Settle an in-doubt tool call offline, by appending an operator ``decision`` entry.

    Exactly one of ``result=`` (the call happened and returned this), ``retry=True`` (run it
    again, once) or ``fail="why"`` (it did not happen; ``ctx.call`` raises ``ToolCallError``
    in the handler). Who (``by``, default ``user@host``), when and why (``reason``) are
    recorded in the entry and in the operator history. A write its handler's own scope
    cancelled while it ran and that waits for a ruling (``Call.needs_ruling``) takes a
    ruling instead: ``result=`` or ``fail=``, recorded in the operator history only (the
    step went on and is not changed; docs/operators.md "Cancelled writes in doubt"). The
    runtime acts on the decision when it next recovers the actor (on start, since the actor
    has unfinished work). A runtime that is running the actor right now does not see it:
    use ``ActorSystem.resolve`` there, or restart that runtime.

    Raises:
        ConfigurationError: not exactly one of the three, the intent is not in doubt, or
            the actor's log is damaged (``verify``).
        ActorNotFoundError: no such actor.
        SequenceConflictError: a runtime appended to the actor meanwhile; nothing written.
    """
    _codec.validate_int(intent_seq, "intent_seq")
    decision = _decisions.operator_record(
        result=result, retry=retry, fail=fail, by=by, reason=reason
    )
    row = await _actor_row(store, actor_id)
    status = await _status(store, row)
    if status.status == "quarantined":
        raise ConfigurationError(
            f"actor {actor_id!r} cannot recover, so a decision would not help: "
            f"{status.problem}. Run 'actorlog verify' and deal with the damage first"
        )
    await refuse_damaged(store, actor_id, "resolve")  # damage recovery does not read
    # a write its handler cancelled while it ran, in doubt: a ruling (ops/rulings.py)
    tool = await check_ruling(store, actor_id, intent_seq, decision.action)
    if tool is not None:
        return await record_ruling(store, actor_id, intent_seq, tool, decision)
    tool = await _decidable(store, actor_id, intent_seq, status)
    action, who = decision.action, decision.by
    last = status.last_seq
    data = _codec.encode_plain(decision.payload(), "decision entry")
    entry = _codec.make_row(actor_id, last + 1, EntryKind.DECISION, action, intent_seq, None, data)
    await store.append(actor_id, last, [entry])
    with contextlib.suppress(Exception):  # history is best effort; the log is the truth
        await store.record_event(
            actor_id,
            EventKind.RESOLVED,
            json.dumps(
                {
                    "intent_seq": intent_seq,
                    "decision_seq": entry.seq,
                    "action": action,
                    "tool": tool,
                    "by": who,
                    "reason": decision.reason,
                    "offline": True,
                }
            ),
        )
    return Decision(
        seq=entry.seq,
        action=action,
        by=who,
        reason=decision.reason,
        at=decision.at,
        value=decision.value,
        error=None if decision.error is None else dict(decision.error.payload()),
    )


async def _decidable(store: Store, actor_id: str, intent_seq: int, status: ActorStatus) -> str:
    """Check that ``intent_seq`` is an intent of the step in progress that an operator may
    decide now; return its tool's name."""
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
    return target.tool


def _check_fork_point(actor_id: str, last_seq: int, at: int) -> None:
    """A fork point is a seq of the actor's log (``fork`` and ``fork_effects`` alike)."""
    if not 1 <= at <= last_seq:
        raise ConfigurationError(
            f"at must be between 1 and actor {actor_id!r}'s last seq {last_seq}, not {at}"
        )


async def fork_effects(
    store: Store, actor_id: str, at: int
) -> tuple[list[ExternalEffect], list[str]]:
    """The external write effects after seq ``at`` that already happened (or may have) in
    ``actor_id``'s run, and warnings about entries after ``at`` that could not be read.

    Listed: write tool calls whose outcome is after ``at`` (ok, error, resolved by an operator,
    or still in doubt) and messages sent to other actors after ``at``. Not listed: reads,
    calls an operator ruled did not happen.

    Raises:
        ConfigurationError: ``at`` is not a seq of the actor's log (1 to its last seq), as
            :func:`fork` refuses it.
    """
    _codec.validate_int(at, "at")
    _check_fork_point(actor_id, (await _actor_row(store, actor_id)).last_seq, at)
    intents: dict[int, tuple[EntryRow, IntentRecord]] = {}
    effects: dict[int, ExternalEffect] = {}
    warnings: list[str] = []
    settled: set[int] = set()  # write intents with any outcome
    async for r in _scan(store, actor_id):
        p, err = _check(r, actor_id)
        if err is not None or p is None:
            if r.seq > at:
                warnings.append(str(err))
            continue
        if isinstance(p, IntentRecord):
            if p.effect == "write":
                intents[r.seq] = (r, p)
                if r.seq > at:
                    effects[r.seq] = _external(r, p, at, "in_doubt", None)
        elif isinstance(p, EffectRecord) and r.type_tag == "send" and r.seq > at:
            v = p.value if isinstance(p.value, dict) else {}
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
                at=p.at,
                repeated_by_fork=r.ref <= at,
            )
        elif r.kind in (EntryKind.RESULT, EntryKind.DECISION) and r.ref in intents:
            settled.add(r.ref)
            if r.seq <= at:
                continue
            irow, ip = intents[r.ref]
            if isinstance(p, ResultRecord):
                outcome = "ok" if p.ok else "error"
            elif r.type_tag == DecisionAction.RESULT:
                outcome = "resolved"
            elif r.type_tag == DecisionAction.FAIL:
                effects.pop(irow.seq, None)
                continue
            else:
                continue  # retry / attempt: still in doubt
            effects[irow.seq] = _external(irow, ip, at, outcome, r.seq)
    for seq, (irow, ip) in intents.items():  # in doubt since before the fork point
        if seq <= at and seq not in settled:
            effects[seq] = _external(irow, ip, at, "in_doubt", None)
    return [effects[k] for k in sorted(effects)], warnings


def _external(
    r: EntryRow, p: IntentRecord, at: int, outcome: str, outcome_seq: int | None
) -> ExternalEffect:
    return ExternalEffect(
        seq=r.seq,
        step_seq=r.ref,
        kind="tool",
        name=r.type_tag,
        args=list(p.args),
        kwargs=dict(p.kwargs),
        key=p.key,
        outcome=outcome,
        outcome_seq=outcome_seq,
        at=p.at,
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
    from the new id and a new incarnation id (its copied messages record one, FORMAT.md
    [F13]).

    Raises:
        ForkRefusedError: there are external effects after ``at`` (see :func:`fork_effects`)
            and ``yes`` is false. Nothing was written.
        ConfigurationError: bad ``at`` or ``new_id``, or ``new_id`` already has a log.
        CorruptEntryError: an entry in 1..``at`` is damaged.
        SequenceConflictError: someone wrote ``new_id`` meanwhile.
    """
    _codec.validate_int(at, "at")
    _codec.validate_actor_id(new_id)
    _codec.validate_optional_text(by, "by")
    if new_id == actor_id:
        raise ConfigurationError("the fork needs a new actor id")
    src = await _actor_row(store, actor_id)
    _check_fork_point(actor_id, src.last_seq, at)
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
        decode_entry(r)
        rows.append(r)
    if len(rows) != at:
        raise CorruptEntryError(
            actor_id, len(rows) + 1, "seq chain", f"the log ends at seq {len(rows)}"
        )
    effects, warnings = await fork_effects(store, actor_id, at)
    if (effects or warnings) and not yes:
        raise ForkRefusedError(actor_id, at, effects, warnings)
    # [F13] the fork is a new incarnation: its copied messages record a fresh incarnation
    # id, so the calls it runs (a copied in-doubt one, new steps) get keys that neither the
    # source nor an earlier fork under the same id ever used
    incarnation = _codec.new_incarnation()
    copies = [
        _codec.make_row(
            new_id,
            r.seq,
            r.kind,
            r.type_tag,
            r.ref,
            r.message_id,
            _with_incarnation(r.payload, incarnation) if r.kind == EntryKind.MESSAGE else r.payload,
        )
        for r in rows
    ]
    reg = await store.register_actor(new_id, src.actor_type)
    if reg.actor_type != src.actor_type:
        raise ConfigurationError(f"actor {new_id!r} exists with type {reg.actor_type}")
    await store.append(new_id, 0, copies)
    # the source's spawn options hold for the fork too (saved "for good": docs/tuning.md)
    options = _records.saved_options(await store.read_events(actor_id))
    if options is not None:
        await store.record_event(new_id, EventKind.OPTIONS, options[1])
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
    who = by or _decisions.whoami()
    detail = {
        "source": actor_id,
        "at": at,
        "fork": new_id,
        "by": who,
        "external_effects": len(effects),
        "confirmed": yes,
    }
    with contextlib.suppress(Exception):
        await store.record_event(new_id, EventKind.FORKED, json.dumps(detail))
        await store.record_event(actor_id, EventKind.FORKED_TO, json.dumps(detail))
    return ForkResult(
        actor_id=new_id,
        source_id=actor_id,
        at=at,
        entries_copied=len(copies),
        snapshot_seq=snapshot_seq,
        effects=effects,
        warnings=warnings,
    )


def _with_incarnation(payload: bytes, incarnation: str) -> bytes:
    """A verified message payload with its incarnation id replaced (FORMAT.md [F13])."""
    obj = _codec.decode_json(payload)
    if isinstance(obj, list):  # [F19] format 2's compact form
        obj[2:3] = [incarnation]
        return _codec.encode_plain(obj, "message")
    assert isinstance(obj, dict)  # decode_entry checked it
    obj["incarnation"] = incarnation
    return _codec.encode_plain(obj, "message")
