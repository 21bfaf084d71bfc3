"""Listing many actors without reading every log: :func:`list_actors_page` and
:func:`waiting_intents`.

A status needs the actor's log read (what recovery would read), so for a store of 100,000
actors it is derived only for the actors a page shows. Filtering by class or id, sorting and
counting use the actors' summary rows (one read of the actor list). Only actors with
messages logged but not yet handled (``last_message_seq > handled_seq`` in their row) can be
``running`` or ``in_doubt``: those filters, the status counts and the in-doubt queue read
just those actors' logs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._journal import codec as _codec
from .._journal.errors import ConfigurationError
from ..store import ActorRow, Store
from .models import ActorPage, ActorStatus, InDoubtIntent
from .reads import _reading, _status

#: what :func:`list_actors_page` sorts by
SORTS: dict[str, Callable[[ActorRow], Any]] = {
    "id": lambda r: r.actor_id,
    "class": lambda r: (r.actor_type, r.actor_id),
    "last_seq": lambda r: (r.last_seq, r.actor_id),
    "created": lambda r: (r.created_at, r.actor_id),
    "pending": lambda r: (_pending(r), r.actor_id),
}

#: the statuses an actor can have (``ActorStatus.status``, as :mod:`.reads` derives them),
#: most severe first
STATUSES = ("quarantined", "stopped", "in_doubt", "running", "idle", "finished", "terminated")

_ONLY_WITH_PENDING_WORK = ("in_doubt", "running")


def _time(at: object) -> float:
    """A time to order by (a damaged or missing one first)."""
    return float(at) if isinstance(at, int | float) and at == at else 0.0


def _pending(r: ActorRow) -> int:
    """Messages logged but not handled, as the summary row says (0 for a damaged row)."""
    return max(0, r.last_message_seq - r.handled_seq) if r.damage is None else 0


async def _one(store: Store, row: ActorRow) -> ActorStatus:
    """One actor's status, in one consistent read (the same derivation as ``actors``)."""
    if row.damage is not None:  # status from what is left of it
        return await _status(store, row)
    async with _reading(store) as (view, _):
        fresh = await view.get_actor(row.actor_id)
        return await _status(view, fresh if fresh is not None else row)


async def list_actors_page(
    store: Store,
    *,
    status: str | None = None,
    actor_type: str | None = None,
    search: str | None = None,
    sort: str = "id",
    descending: bool = False,
    offset: int = 0,
    limit: int = 50,
    status_limit: int = 2_000,
) -> ActorPage:
    """One page of actors with their status, filtered and sorted.

    Args:
        status: only actors with this status (see :data:`STATUSES`). ``in_doubt`` and
            ``running`` read only actors with pending work; the others read actors in sort
            order until the page is full, so ``total`` is then None unless the scan reached
            the end.
        actor_type: only actors of this class (exact).
        search: only actors whose id contains this text (case-insensitive).
        sort: a key of :data:`SORTS`: ``id``, ``class``, ``last_seq``, ``created`` or
            ``pending`` (messages not yet handled).
        offset: where the page starts among the matching actors; with a status filter, the
            ``next_offset`` of the page before.
        limit: at most this many actors (1..1000).
        status_limit: count the statuses of the actors with pending work only when there
            are at most this many (each needs its log read).

    Raises:
        ConfigurationError: an unknown sort or status, a bad offset or limit, a filter that
            is not text (or holds NUL or lone surrogates).
    """
    for name, n in (("offset", offset), ("limit", limit), ("status_limit", status_limit)):
        _codec.validate_int(n, name)
    for name, text in (("status", status), ("actor_type", actor_type), ("search", search)):
        _codec.validate_optional_text(text, name)
    if not isinstance(sort, str) or sort not in SORTS:
        raise ConfigurationError(
            f"sort must be one of {', '.join(SORTS)}, not {_codec.shown(sort)}"
        )
    if status is not None and status not in STATUSES:
        raise ConfigurationError(
            f"status must be one of {', '.join(STATUSES)}, not {_codec.shown(status)}"
        )
    descending = bool(descending)  # a flag: any value, by its truth
    if offset < 0 or not 1 <= limit <= 1000:
        raise ConfigurationError(f"offset must be >= 0 and limit 1..1000 (got {offset}, {limit})")
    rows = await store.list_actors()
    classes: dict[str, int] = {}
    for r in rows:
        classes[r.actor_type] = classes.get(r.actor_type, 0) + 1
    needle = (search or "").casefold()
    matching = [
        r
        for r in rows
        if (actor_type is None or r.actor_type == actor_type)
        and (not needle or needle in r.actor_id.casefold())
    ]
    pending = [r for r in matching if _pending(r) > 0]
    status_counts: dict[str, int] | None = None
    if len(pending) <= status_limit:
        status_counts = {}
        for r in pending:
            s = (await _one(store, r)).status
            status_counts[s] = status_counts.get(s, 0) + 1
    if status in _ONLY_WITH_PENDING_WORK:
        matching = pending
    matching.sort(key=SORTS[sort], reverse=descending)
    page: list[ActorStatus] = []
    total: int | None
    if status is None:
        total = len(matching)
        for r in matching[offset : offset + limit]:
            page.append(await _one(store, r))
        end = offset + len(page)
        next_offset = end if end < total else None
    else:
        pos = offset
        while pos < len(matching) and len(page) < limit:
            a = await _one(store, matching[pos])
            pos += 1
            if a.status == status:
                page.append(a)
        next_offset = pos if pos < len(matching) else None
        total = None
        if next_offset is None and offset == 0:
            total = len(page)
    return ActorPage(
        actors=page,
        total=total,
        offset=offset,
        next_offset=next_offset,
        actors_in_store=len(rows),
        with_pending_work=len(pending),
        status_counts=status_counts,
        classes=dict(sorted(classes.items())),
    )


async def waiting_intents(store: Store) -> list[tuple[ActorStatus, InDoubtIntent]]:
    """Every tool call waiting for an operator's decision, across all actors, oldest first
    (by the time its intent was logged). Reads only the logs of actors with pending work."""
    out: list[tuple[ActorStatus, InDoubtIntent]] = []
    for r in await store.list_actors():
        if _pending(r) == 0:
            continue
        a = await _one(store, r)
        out.extend((a, i) for i in a.in_doubt if i.needs_operator)
    out.sort(
        key=lambda ai: (ai[1].at if isinstance(ai[1].at, int | float) else 0.0, ai[0].actor_id)
    )
    return out
