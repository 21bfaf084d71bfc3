"""``actorlog timers STORE``: the store's timers and schedules, for operators."""

from __future__ import annotations

import datetime
import time
from collections.abc import Sequence

from .._views.term import Out, clean, json_line
from ..ops.timers import timer_view
from ..store import TimerRow

__all__ = ["print_timers"]


def _when(ts: float) -> str:
    try:
        at = datetime.datetime.fromtimestamp(ts, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, OSError, ValueError, TypeError):  # NaN, inf, out of range: damage
        return f"DAMAGED time {ts!r}"
    delta = ts - time.time()
    rel = f"in {delta:.0f}s" if delta >= 0 else f"{-delta:.0f}s ago"
    return f"{at}Z ({rel})"


def _what(t: TimerRow) -> str:
    view = timer_view(t)
    rec = view.get("recurrence")
    if isinstance(rec, dict):
        every = rec.get("every")
        if every is None:
            how = f"cron {rec.get('cron')}"
        elif isinstance(every, int | float) and not isinstance(every, bool):
            how = f"every {every:g}s"
        else:
            how = f"every DAMAGED {every!r}"
        return f"schedule, {how}, missed={rec.get('missed')}"
    return "once"


def print_timers(found: Sequence[TimerRow], out: Out, *, as_json: bool) -> None:
    """Print ``found`` as a table (or one JSON object per line)."""
    if as_json:
        for t in found:
            json_line(out.stream, timer_view(t))
        return
    if not found:
        out.line("no timers in this store")
        return
    header = ["TIMER", "ACTOR", "MESSAGE", "STATE", "DUE (UTC)", "KIND"]
    rows = [
        [clean(str(c)) for c in (t.timer_id, t.actor_id, t.type_tag, t.state)]
        + [_when(t.due), _what(t)]
        for t in found
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    out.line(
        out.s.bold("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip())
    )
    for r in rows:
        out.line("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
