"""The operator's view of timers and schedules (``actorlog timers STORE``)."""

from __future__ import annotations

import json
from typing import Any, cast

from .._journal import codec as _codec
from ..store import Store, TimerRow, TimerStore

__all__ = ["timer_view", "timers"]


async def timers(store: Store, actor_id: str | None = None) -> list[TimerRow]:
    """The store's timers (``send_later``) and schedules, in any state (``pending``,
    ``fired``, ``cancelled``), by due time; of one addressee with ``actor_id``. Empty for
    a store without ``capabilities.timers``."""
    if not store.capabilities.timers:
        return []
    if actor_id is not None:
        _codec.validate_actor_id(actor_id)
    return list(await cast("TimerStore", store).list_timers(actor_id))


def timer_view(t: TimerRow) -> dict[str, Any]:
    """A timer as a JSON object (``actorlog timers --json``): its row, the schedule's
    recurrence parsed, ``kind`` (``schedule`` or ``timer``) and, for a timer settled as
    undeliverable (``failed: ...``) or a damaged row (``damaged: ...``), ``reason``."""
    view: dict[str, Any] = t._asdict()
    view["kind"] = "schedule" if t.recurrence is not None else "timer"
    for settled in ("failed: ", "damaged: "):  # why it never fires (store.TimerRow.state)
        if isinstance(t.state, str) and t.state.startswith(settled):
            view["reason"] = t.state[len(settled) :]
    if t.recurrence is not None:
        try:
            view["recurrence"] = json.loads(t.recurrence)
        except ValueError:
            pass
    return view
