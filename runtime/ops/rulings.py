"""An operator's ruling on a write the handler's own scope cancelled while its tool ran
(issue 25; docs/operators.md "Cancelled writes in doubt").

Such a call's result is ``settled_by: cancelled`` with ``in_doubt: true`` ([F18]): the step
went on without it and is complete, so nothing an operator says changes the step, its state
or its replay, and the log is not written. A ruling (``resolve`` with ``result=``: it
happened and returned this; ``fail=``: it did not happen) is recorded as a ``resolved``
event of the operator history with ``"ruling": true``: the record of what the operator
found, shown by ``history`` (``Call.ruling``), after which the call no longer needs one.
A retry cannot run (the handler that asked for it went on), and a call takes one ruling.
"""

from __future__ import annotations

import json

from .. import _codec, _records
from .._errors import AlreadyDecidedError, ConfigurationError
from .._records import DecisionAction, DecisionRecord, EventKind, ResultRecord, SettledBy
from ..store import Store
from .history import history, ruling_of
from .models import Call, Decision, Event

__all__ = ["calls_needing_ruling", "check_ruling", "record_ruling"]


async def calls_needing_ruling(store: Store, actor_id: str) -> list[Call]:
    """The calls of ``actor_id`` that its handler's own scope cancelled while their tool (a
    write that escalates) ran and that no operator has ruled on yet, oldest first.

    Raises:
        ActorNotFoundError: no such actor.
    """
    h = await history(store, actor_id)
    return [c for s in h.steps for c in s.calls if c.needs_ruling]


async def check_ruling(store: Store, actor_id: str, intent_seq: int, action: str) -> str | None:
    """If ``intent_seq`` is a cancelled write in doubt, check that ``action`` may rule on it
    and return its tool's name; None if it is not one (``resolve`` goes on as before).

    Raises:
        ConfigurationError: ``action`` is ``retry``.
        AlreadyDecidedError: it has its ruling already.
    """
    results = await store.find_ref(actor_id, "result", intent_seq)
    if not results:
        return None
    first = min(results, key=lambda r: r.seq)
    _codec.verify_row(first, actor_id, first.seq)
    rec = _records.decode_entry(first)
    if not (
        isinstance(rec, ResultRecord) and rec.settled_by == SettledBy.CANCELLED and rec.in_doubt
    ):
        return None
    if action == DecisionAction.RETRY:
        raise ConfigurationError(
            f"intent seq {intent_seq} of actor {actor_id!r} ({first.type_tag}) was cancelled "
            "by its handler while it ran and the step went on: a retry cannot run. Rule with "
            "result= (it happened) or fail= (it did not)"
        )
    for ev in await store.read_events(actor_id):
        try:
            detail = json.loads(ev.detail)
        except ValueError:
            continue
        if not isinstance(detail, dict):
            continue
        found = ruling_of(Event(at=ev.at, kind=ev.kind, detail=detail))
        if found is not None and found.intent_seq == intent_seq:
            d = found.decision
            raise AlreadyDecidedError(
                actor_id, intent_seq, action=d.action, by=d.by, at=d.at, seq=None
            )
    return first.type_tag


async def record_ruling(
    store: Store, actor_id: str, intent_seq: int, tool: str, decision: DecisionRecord
) -> Decision:
    """Record the ruling (checked by :func:`check_ruling`) in the operator history."""
    error = None if decision.error is None else dict(decision.error.payload())
    detail = {
        "intent_seq": intent_seq,
        "action": decision.action,
        "tool": tool,
        "by": decision.by,
        "reason": decision.reason,
        "ruling": True,
        "offline": True,
    }
    if decision.action == DecisionAction.RESULT:
        detail["value"] = decision.value
    else:
        detail["error"] = error
    await store.record_event(actor_id, EventKind.RESOLVED, json.dumps(detail))
    return Decision(
        seq=0,
        action=decision.action,
        by=decision.by,
        reason=decision.reason,
        at=decision.at,
        value=decision.value,
        error=error,
    )
