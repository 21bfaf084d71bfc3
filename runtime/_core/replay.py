"""Replaying one recorded message: the rules recovery, ``read_state`` (``_runtime/query.py``)
and the replay tester (``actorlog.testing.replay``) share, so the three cannot drift apart.

A logged message whose step was refused (the actor had ended) or did not decode never ran its
handler live, so it is not run on replay either (:func:`handler_never_ran`). Any other is run
with its recorded effects (:func:`run_recorded`): a step that was cancelled live is cut where
its log ends, and a tool call's error the handler let out is the step's recorded outcome, not a
replay failure.
"""

from __future__ import annotations

from typing import Any

import anyio

from .._durability import lifecycle as _lifecycle
from .._durability.plan import PendingMessage, decode_failed
from .._effects import tools as _tools
from .._effects.actor import Actor
from .._effects.cancelling import is_call_error
from .._effects.context import Context

__all__ = ["handler_never_ran", "run_recorded"]


def handler_never_ran(m: PendingMessage) -> bool:
    """Its step was refused because the actor had ended, or its message did not decode
    (or the class running then did not accept it): the handler never ran live, so it does
    not run on replay either, even if the code now could."""
    step = m.step
    return step is not None and (
        _lifecycle.refused_step(step, len(m.recorded)) or decode_failed(step)
    )


async def run_recorded(
    actor: Actor[Any], ctx: Context, msg: Any, m: PendingMessage, where: str
) -> BaseException | None:
    """Run ``actor``'s handler for ``msg`` over the effects ``ctx`` serves from the log.

    Returns the tool-call error the handler let out (the recorded outcome stands; only the
    effects must match), else None; anything else it raises propagates. A step recorded
    as cancelled live (``StepCancelledError``) is cut where its log ends, as live was.
    """
    err = None if m.step is None else m.step.error
    try:
        if err is not None and err.type == "StepCancelledError":
            with anyio.CancelScope() as scope, _tools.in_step(where), ctx._handler_task():
                ctx.cancel_replay = scope  # cancelled live: cut where its log ends
                await actor.receive(ctx, msg)
        else:  # no scope to cut it with (an unused one costs a scope's set-up a step)
            with _tools.in_step(where), ctx._handler_task():
                await actor.receive(ctx, msg)
    except BaseException as exc:
        if not is_call_error(exc):
            raise
        return exc
    return None
