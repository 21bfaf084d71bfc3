"""A write the handler's own scope cancelled while its tool ran (a race's loser, a deadline;
issue 25): what its in-doubt policy records in the cancelled result (docs/retries.md,
"Cancelled while running"; FORMAT.md [F18])."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from . import _codec, _telemetry
from ._errors import EncodeError
from ._records import EventKind, doubt_keys
from ._stephost import StepHost
from ._tools import Happened, NotHappened, Tool

__all__ = ["abandoned_in_doubt"]


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
