"""A call the handler's own scope cancelled (a race's loser, a deadline; issue 25): the
cancelled result it is settled with, and, for a write that may have taken effect (its tool
was running, or its in-doubt policy was settling an attempt that may have: a reconcile
function asked, an operator's ruling awaited), what its in-doubt policy records in it
(docs/retries.md, "Cancelled while running"; FORMAT.md [F18])."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from .._journal import codec as _codec, records as _records
from .._journal.errors import EncodeError
from .._journal.records import EntryKind, ErrorInfo, EventKind, SettledBy, doubt_keys
from .._tracing import telemetry as _telemetry
from .stephost import StepHost
from .tools import Happened, NotHappened, Tool

__all__ = ["abandoned_error", "abandoned_in_doubt", "not_started_error", "settle_cancelled"]


async def settle_cancelled(
    cell: StepHost,
    t: Tool[Any, Any],
    intent_seq: int,
    ask: Callable[[], Awaitable[Happened | NotHappened | None]],
    *,
    doubtful: bool,
) -> None:
    """Write the cancelled result of call ``intent_seq`` (written, not flushed: the step's
    entry or the next flush makes it durable). ``doubtful``: its current attempt may have
    taken effect, so its in-doubt policy says what the result records
    (:func:`abandoned_in_doubt`). A cancellation point only for a reconciled write."""
    doubt = await abandoned_in_doubt(cell, t, intent_seq, ask) if doubtful else {}
    cell.journal.write(
        EntryKind.RESULT,
        t.name,
        intent_seq,
        _records.result_payload(
            error=abandoned_error(), settled_by=SettledBy.CANCELLED, doubt=doubt
        ),
    )


async def abandoned_in_doubt(
    cell: StepHost,
    t: Tool[Any, Any],
    intent_seq: int,
    ask: Callable[[], Awaitable[Happened | NotHappened | None]],
) -> dict[str, Any]:
    """The [F18] keys of the cancelled result of a call whose tool was running: a read or
    an idempotent write none (the handler abandoned it: it is never re-run); a write that
    reconciles what its reconcile function (``ask``) answers, asked now, shielded from the
    handler's cancel and bounded by the tool's timeout; a write that escalates (or whose
    reconcile function gives no answer) ``in_doubt``, for an operator's ruling."""
    policy = t.policy
    if policy in ("rerun", "rerun-same-key"):
        _telemetry.settled(intent_seq, t.name, policy, "cancelled")
        return {}
    cell.note_event(
        EventKind.IN_DOUBT,
        {"intent_seq": intent_seq, "tool": t.name, "policy": policy, "cancelled": True},
    )
    if policy == "reconcile":
        limit = t.timeout if t.timeout is not None else float("inf")
        with anyio.CancelScope(shield=True), anyio.move_on_after(limit):
            answer = await ask()
            if isinstance(answer, NotHappened):
                _telemetry.settled(intent_seq, t.name, policy, "reconcile.not_happened")
                return doubt_keys(False, "not_happened")
            if isinstance(answer, Happened):
                try:
                    plain = _codec.to_plain(answer.result, "result")
                except EncodeError as exc:  # it happened, its result cannot be logged
                    cell.note_event(
                        EventKind.RECONCILE_FAILED, {"intent_seq": intent_seq, "error": exc.reason}
                    )
                else:
                    _telemetry.settled(intent_seq, t.name, policy, "reconcile.happened")
                    return doubt_keys(False, "happened", plain)
    _telemetry.settled(intent_seq, t.name, policy, "cancelled.in_doubt")
    return doubt_keys(True, None)


def abandoned_error() -> ErrorInfo:
    """The error a call is settled with when the handler's own scope cancelled it."""
    return ErrorInfo(
        "Cancelled",
        "the handler's own cancel scope cancelled this call before "
        "it returned, and the step went on; it may or may not have taken effect",
    )


def not_started_error() -> ErrorInfo:
    """The error a call is settled with when the handler's own scope cancelled it while its
    intent was being committed: its tool never started."""
    return ErrorInfo(
        "Cancelled",
        "the handler's own cancel scope cancelled this call while its intent was being "
        "committed, and the step went on; the tool did not run",
    )
