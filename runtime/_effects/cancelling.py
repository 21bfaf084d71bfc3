"""Whose cancellation is it? Telling a cancellation the runtime asked for from one a tool or a
handler raised on its own (DESIGN: cancellation belongs to whoever started it).

A leaf: the step, the tool calls, recovery and queries ask it in their ``except`` clauses.
"""

from __future__ import annotations

import math
import sys

import anyio

__all__ = ["cancel_requested", "is_call_error"]


def cancel_requested() -> bool:
    """True if a cancel scope around the current task (the runtime's, or the handler's own
    timeout) has been cancelled, or (asyncio) someone cancelled the task itself."""
    deadline = anyio.current_effective_deadline()
    if deadline == -math.inf or deadline <= anyio.current_time():
        return True
    aio = sys.modules.get("asyncio")  # imported by whatever runs an asyncio loop
    if aio is None:
        return False
    try:
        task = aio.current_task()
    except RuntimeError:  # not running on asyncio
        return False
    return task is not None and task.cancelling() > 0


def is_call_error(exc: BaseException) -> bool:
    """Is ``exc``, raised by a tool or a handler, that call's own error (to be recorded)?

    Every ``Exception`` is. So is a ``BaseException`` nobody asked for: ``GeneratorExit``,
    or a cancellation exception (``asyncio.CancelledError``, ``trio.Cancelled``) while no
    scope around the call is cancelled (a tool awaiting a future another task cancelled).
    A cancellation that was asked for, ``KeyboardInterrupt`` and ``SystemExit`` are not:
    they propagate. Call it in the ``except`` clause, before any checkpoint.
    """
    if isinstance(exc, Exception):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(is_call_error(e) for e in exc.exceptions)
    if isinstance(exc, (KeyboardInterrupt, SystemExit)):
        return False
    if isinstance(exc, anyio.get_cancelled_exc_class()):
        return not cancel_requested()
    return True
