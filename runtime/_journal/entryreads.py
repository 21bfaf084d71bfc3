"""Reading back what was just written or saved: a field of an entry this runtime just wrote
(what replay will read), and an actor's saved spawn options (re-exported by ``_records``)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Literal

from ..store import EntryRow, EventRow
from . import codec as _codec, compact as _compact
from .entrykinds import EventKind

__all__ = ["LoggedField", "logged", "saved_options"]

LoggedField = Literal["body", "value", "reply"]


def logged(row: EntryRow, field: LoggedField) -> Any:
    """``field`` of an entry this runtime just wrote, decoded from its bytes: what replay
    will read (a message's ``body``, a result's or effect's ``value``, an ok step's
    ``reply``), without building the whole record (it runs for most entries)."""
    obj = _codec.decode_json(row.payload)
    if type(obj) is list:  # [F19] format 2's compact form
        return _compact.field_at(row.kind, obj, field)
    return obj[field]


def saved_options(events: Iterable[EventRow]) -> tuple[dict[str, Any], str] | None:
    """The spawn options last saved for an actor (its newest undamaged ``options`` event
    whose detail is a JSON object), as (options, the event's detail); None if none."""
    found = None
    for ev in events:
        if ev.kind == EventKind.OPTIONS and ev.damage is None:
            try:
                value = json.loads(ev.detail)
            except ValueError:
                continue
            if isinstance(value, dict):
                found = (value, ev.detail)
    return found
