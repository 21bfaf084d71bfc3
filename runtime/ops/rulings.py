"""An operator's ruling on a write the handler's own scope cancelled while its tool ran
(issue 25; docs/operators.md "Cancelled writes in doubt").

Such a call's result is ``settled_by: cancelled`` with ``in_doubt: true`` ([F18]): the step
went on without it and is complete, so nothing an operator says changes the step, its state
or its replay, and the log is not written. A ruling (``resolve`` with ``result=``: it
happened and returned this; ``fail=``: it did not happen) is recorded as a ``resolved``
event of the operator history with ``"ruling": true``: the record of what the operator
found, shown by ``history`` (``Call.ruling``), after which the call no longer needs one.
A retry cannot run (the handler that asked for it went on), and a call takes one ruling.
The check and the record are :mod:`actorlog._durability.rulings`, shared with
``ActorSystem.resolve`` (which rules live, through the actor's owner on PostgreSQL) and the console.
"""

from __future__ import annotations

from .._durability import rulings as _rulings
from .._journal import codec as _codec
from .._journal.errors import ActorNotFoundError
from .._journal.records import DecisionRecord
from ..store import Store
from .history import history
from .models import ActorStatus, Call, Decision

__all__ = ["calls_needing_ruling", "check_ruling", "record_ruling", "waiting_rulings"]


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
    return await _rulings.check(store, actor_id, intent_seq, action)


async def record_ruling(
    store: Store, actor_id: str, intent_seq: int, tool: str, decision: DecisionRecord
) -> Decision:
    """Record the ruling (checked by :func:`check_ruling`) in the operator history."""
    detail = _rulings.detail_of(
        intent_seq, tool, decision, offline=True, ruling_id=_codec.new_message_id()
    )
    await _rulings.record(store, actor_id, detail)
    return Decision(
        seq=0,
        action=decision.action,
        by=decision.by,
        reason=decision.reason,
        at=decision.at,
        value=decision.value,
        error=detail.get("error"),
    )


async def rulings_if_any(store: Store, actor_id: str) -> list[Call]:
    """:func:`calls_needing_ruling`, reading the whole log only when the cheap reads say the
    actor may have such a call (see :func:`waiting_rulings`): the console's actor page."""
    if not await _rulings.may_need_ruling(store, actor_id):
        return []
    return await calls_needing_ruling(store, actor_id)


def _time(at: object) -> float:
    return float(at) if isinstance(at, int | float) and at == at else 0.0


async def waiting_rulings(store: Store) -> list[tuple[ActorStatus, Call]]:
    """Every call waiting for a ruling (:func:`calls_needing_ruling`), across all actors,
    oldest first (by the time its intent was logged). Reads each actor's operator history
    and the outcomes of the calls it reports in doubt; the whole log only of an actor that
    has such a call (``in_doubt`` events are the runtime's, best effort: the actor's own
    :func:`calls_needing_ruling` reads its log in any case)."""
    out: list[tuple[ActorStatus, Call]] = []
    for r in await store.list_actors():
        if r.damage is not None or not await _rulings.may_need_ruling(store, r.actor_id):
            continue
        try:
            h = await history(store, r.actor_id)
        except ActorNotFoundError:  # deleted meanwhile
            continue
        out.extend((h.actor, c) for s in h.steps for c in s.calls if c.needs_ruling)
    out.sort(key=lambda ac: (_time(ac[1].at), ac[0].actor_id))
    return out
