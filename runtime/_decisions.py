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

import getpass
import socket
from collections.abc import Sequence
from typing import Any

from . import _codec, _records
from ._errors import AlreadyDecidedError, ConfigurationError
from .store import EntryRow, Store

__all__ = [
    "MISSING",
    "already_decided",
    "check_decidable",
    "operator_decision",
    "settling",
    "state",
    "whoami",
]

#: (kind, action, payload): ``kind`` is ``result`` or ``decision``; ``action`` its type tag.
Outcome = tuple[str, str, dict[str, Any]]


def settling(outcomes: Sequence[Outcome]) -> Outcome | None:
    """The outcome that settled the intent (the first that settles), or None."""
    for o in outcomes:
        if o[0] == "result" or o[1] in ("result", "fail"):
            return o
    return None


def state(outcomes: Sequence[Outcome], policy: object) -> str | None:
    """``None`` (settled), ``in_doubt`` (waits for an operator), ``auto`` (its policy settles
    it on recovery), ``retry_authorized`` or ``retry_interrupted`` (waits again)."""
    if settling(outcomes) is not None:
        return None
    if not outcomes:
        return "in_doubt" if policy == "escalate" else "auto"
    return "retry_authorized" if outcomes[-1][1] == "retry" else "retry_interrupted"


def _decode(row: EntryRow, actor_id: str) -> dict[str, Any]:
    _codec.verify_row(row, actor_id, row.seq)
    return _records.decode(row)


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
    if row.kind != "intent":
        raise ConfigurationError(
            f"{lead}seq {intent_seq} of actor {actor_id!r} is a {row.kind}, not an intent: only a "
            "tool call's intent takes a decision (see 'actorlog actors' for the ones in doubt)"
        )
    outcomes: list[tuple[EntryRow, dict[str, Any]]] = []
    for kind in ("result", "decision"):
        for r in await store.find_ref(actor_id, kind, intent_seq):
            outcomes.append((r, _decode(r, actor_id)))
    outcomes.sort(key=lambda o: o[0].seq)
    for r, p in outcomes:
        if r.kind == "result":
            raise ConfigurationError(
                f"{lead}intent seq {intent_seq} of actor {actor_id!r} ({row.type_tag}) has a "
                f"result (seq {r.seq}, {'ok' if p.get('ok') else 'error'}, settled by "
                f"{p.get('settled_by', 'run')}): it is not in doubt, so nothing was written"
            )
        if r.type_tag in ("result", "fail"):
            raise AlreadyDecidedError(
                actor_id,
                intent_seq,
                action=r.type_tag,
                by=str(p.get("by")),
                at=p.get("at"),
                seq=r.seq,
            )
    if outcomes and outcomes[-1][0].type_tag == "retry":
        r, p = outcomes[-1]
        raise AlreadyDecidedError(
            actor_id, intent_seq, action="retry", by=str(p.get("by")), at=p.get("at"), seq=r.seq
        )
    return row


def already_decided(actor_id: str, intent_seq: int, payload: dict[str, Any]) -> AlreadyDecidedError:
    """The error for a decision this runtime took (or is writing) for a waiting step."""
    return AlreadyDecidedError(
        actor_id,
        intent_seq,
        action=str(payload.get("action")),
        by=str(payload.get("by")),
        at=payload.get("at"),
        seq=None,
        pending=True,
    )


#: The default of ``result=``: "not given" (``None`` is a result like any other).
MISSING: Any = object()


def whoami() -> str:
    """The default ``by`` of an operator's decision: ``user@host``."""
    try:
        user = getpass.getuser()
    except Exception:
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def operator_decision(
    *, result: Any, retry: bool, fail: str | None, by: str | None, reason: str
) -> dict[str, Any]:
    """The ``decision`` payload that ``resolve(result=... | retry=True | fail="why")`` asks
    for, live (``ActorSystem.resolve``) or offline (``actorlog.ops.resolve``).

    Raises:
        ConfigurationError: not exactly one of the three.
        EncodeError: ``result`` cannot be encoded. Nothing is written either way.
    """
    if sum([result is not MISSING, bool(retry), fail is not None]) != 1:
        raise ConfigurationError("pass exactly one of result=..., retry=True, fail='why'")
    who = by or whoami()
    if result is not MISSING:
        value = _codec.to_plain(result, "resolved result")
        return _records.decision_payload(action="result", value=value, by=who, reason=reason)
    if retry:
        return _records.decision_payload(action="retry", by=who, reason=reason)
    return _records.decision_payload(
        action="fail",
        error={"type": "OperatorFailed", "message": str(fail)},
        by=who,
        reason=reason or str(fail),
    )
