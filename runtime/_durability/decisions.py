"""One decision per intent: the rules that the live resolve (``ActorSystem.resolve``), the
offline one (``actorlog resolve``, :func:`actorlog.ops.resolve`) and replay share.

An intent's outcomes are its ``result`` and ``decision`` entries, in log order. The first
that settles it (a ``result``, or a ``result``/``fail`` decision) is the one the live step
used, so replay serves that one and ignores anything after it (only a store written before
this rule could hold more). An operator may decide an intent only while nothing settled it
and no decision waits to be acted on: after an authorized retry started (``attempt``) and
did not finish, the call is in doubt again and takes one new decision.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from .._journal import codec as _codec
from .._journal.errors import AlreadyDecidedError, ConfigurationError
from .._journal.records import (
    DecisionAction,
    DecisionRecord,
    EntryKind,
    ErrorInfo,
    Outcome,
    ResultRecord,
    decode_entry,
)
from ..store import EntryRow, Store

__all__ = [
    "MISSING",
    "already_decided",
    "check_decidable",
    "operator_record",
    "settling",
    "state",
    "whoami",
]


def settling(outcomes: Sequence[Outcome]) -> Outcome | None:
    """The outcome that settled the intent (the first that settles), or None."""
    for o in outcomes:
        if o.settles:
            return o
    return None


def state(outcomes: Sequence[Outcome], policy: object) -> str | None:
    """``None`` (settled), ``in_doubt`` (waits for an operator), ``auto`` (its policy settles
    it on recovery, or its retry policy goes on), ``retry_authorized`` or
    ``retry_interrupted`` (waits again)."""
    if settling(outcomes) is not None:
        return None
    if not outcomes:
        return "in_doubt" if policy == "escalate" else "auto"
    last = outcomes[-1].record
    if isinstance(last, DecisionRecord) and last.action == DecisionAction.RETRY:
        return "retry_authorized"
    if isinstance(last, DecisionRecord) and last.action == DecisionAction.ATTEMPT_FAILED:
        # between attempts of the tool's retry policy: recovery waits out the back-off and
        # goes on; a write that timed out goes by its in-doubt policy first
        return "in_doubt" if last.in_doubt and policy == "escalate" else "auto"
    if policy != "escalate":
        # an attempt was running (of the retry policy, a re-run, an authorized retry): a
        # read, an idempotent write or a reconcile runs its in-doubt policy again
        return "auto"
    if len(outcomes) >= 2 and outcomes[-2].tag == DecisionAction.ATTEMPT_FAILED:
        # an attempt of the retry policy was running: in doubt like a first attempt
        return "in_doubt"
    return "retry_interrupted"


def _decode(row: EntryRow, actor_id: str) -> ResultRecord | DecisionRecord | None:
    """The record of a result or decision row (verified); None for another kind."""
    _codec.verify_row(row, actor_id, row.seq)
    rec = decode_entry(row)
    return rec if isinstance(rec, ResultRecord | DecisionRecord) else None


async def check_decidable(
    store: Store, actor_id: str, intent_seq: int, *, head: str = ""
) -> EntryRow:
    """Read the intent at ``intent_seq`` and what refers to it; return the intent's row if an
    operator may decide it now. ``head`` starts the message of a ``ConfigurationError``
    (what the caller found waiting).

    Raises:
        ConfigurationError: there is no entry at that seq, or it is not an intent.
        AlreadyDecidedError: it has a result, or a decision that settled it or waits to be
            acted on (a retry not started yet).
        CorruptEntryError: the intent or one of its outcomes is damaged.
    """
    lead = f"{head}: " if head else ""
    rows = await store.read(actor_id, after_seq=intent_seq - 1, upto_seq=intent_seq)
    if not rows:
        raise ConfigurationError(f"{lead}actor {actor_id!r} has no entry at seq {intent_seq}")
    row = rows[0]
    _decode(row, actor_id)
    if row.kind != EntryKind.INTENT:
        raise ConfigurationError(
            f"{lead}seq {intent_seq} of actor {actor_id!r} is a {row.kind}, not an intent: only a "
            "tool call's intent takes a decision (see 'actorlog actors' for the ones in doubt)"
        )
    outcomes: list[tuple[int, ResultRecord | DecisionRecord]] = []
    for kind in (EntryKind.RESULT, EntryKind.DECISION):
        for r in await store.find_ref(actor_id, kind, intent_seq):
            rec = _decode(r, actor_id)
            if rec is not None:
                outcomes.append((r.seq, rec))
    outcomes.sort(key=lambda o: o[0])
    for seq, rec in outcomes:
        if isinstance(rec, ResultRecord):
            raise ConfigurationError(
                f"{lead}intent seq {intent_seq} of actor {actor_id!r} ({row.type_tag}) has a "
                f"result (seq {seq}, {'ok' if rec.ok else 'error'}, settled by "
                f"{rec.settled_by}): it is not in doubt, so nothing was written"
            )
        if rec.settles:
            raise AlreadyDecidedError(
                actor_id, intent_seq, action=rec.action, by=rec.by, at=rec.at, seq=seq
            )
    if outcomes:
        seq, last = outcomes[-1]
        if isinstance(last, DecisionRecord) and last.action == DecisionAction.RETRY:
            raise AlreadyDecidedError(
                actor_id, intent_seq, action=last.action, by=last.by, at=last.at, seq=seq
            )
    return row


def already_decided(
    actor_id: str, intent_seq: int, decision: DecisionRecord
) -> AlreadyDecidedError:
    """The error for a decision this runtime took (or is writing) for a waiting step."""
    return AlreadyDecidedError(
        actor_id,
        intent_seq,
        action=decision.action,
        by=decision.by,
        at=decision.at,
        seq=None,
        pending=True,
    )


#: The default of ``result=``: "not given" (``None`` is a result like any other).
MISSING: Any = object()


def whoami() -> str:
    """The default ``by`` of an operator's decision: ``user@host``."""
    try:
        import getpass  # (and termios): only when an operator decides

        user = getpass.getuser()
    except Exception:
        user = "unknown"
    import socket  # only when an operator decides (asyncio and trio import it for a run)

    return f"{user}@{socket.gethostname()}"


def operator_record(
    *, result: Any, retry: bool, fail: str | None, by: str | None, reason: str
) -> DecisionRecord:
    """The ``decision`` that ``resolve(result=... | retry=True | fail="why")`` asks for, live
    (``ActorSystem.resolve``) or offline (``actorlog.ops.resolve``), stamped now.

    Raises:
        ConfigurationError: not exactly one of the three.
        EncodeError: ``result`` cannot be encoded. Nothing is written either way.
    """
    _codec.validate_optional_text(by, "by")
    _codec.validate_text(reason, "reason")
    _codec.validate_optional_text(fail, "fail")
    if sum([result is not MISSING, bool(retry), fail is not None]) != 1:
        raise ConfigurationError("pass exactly one of result=..., retry=True, fail='why'")
    who = by or whoami()
    now = time.time()
    if result is not MISSING:
        value = _codec.to_plain(result, "resolved result")
        return DecisionRecord(DecisionAction.RESULT.value, value, by=who, reason=reason, at=now)
    if retry:
        return DecisionRecord(DecisionAction.RETRY.value, by=who, reason=reason, at=now)
    return DecisionRecord(
        DecisionAction.FAIL.value,
        error=ErrorInfo(type="OperatorFailed", message=str(fail)),
        by=who,
        reason=reason or str(fail),
        at=now,
    )


def restarted_detail(by: str | None, reason: str, error: object) -> dict[str, Any]:
    """The detail of a ``restarted`` event (``ActorSystem.restart`` and the offline
    ``actorlog restart`` write the same): who, why, and the error it was quarantined with."""
    return {"by": by or whoami(), "reason": reason, "error": str(error)}
