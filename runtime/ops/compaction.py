"""Compacting logs offline (``actorlog compact``): the operator's side of retention."""

from __future__ import annotations

import json
from datetime import timedelta

import attrs

from .._durability import decisions as _decisions, retention as _retention
from .._journal import codec as _codec
from .._journal.entrykinds import EventKind
from .._journal.errors import ActorNotFoundError, ConfigurationError
from ..store import CompactingStore, Store

__all__ = ["CompactResult", "compact"]


@attrs.define
class CompactResult:
    """One actor's compaction: its log now starts at ``first_seq``; ``removed`` entries
    went (0: none could); ``retention`` is the rule applied (``"all"``: the actor was
    left alone); ``reason`` says what stopped compaction where it did."""

    actor_id: str
    first_seq: int
    removed: int
    retention: str
    reason: str


async def compact(
    store: Store,
    actor_id: str | None = None,
    *,
    retention: str | float | timedelta | None = None,
    by: str | None = None,
) -> list[CompactResult]:
    """Compact every actor's log (or one actor's) as far as its retention lets it.

    Without ``retention``, each actor's own is used: the one its last ``spawn`` saved
    (``retention=`` option) or its runtime last compacted with; an actor with neither is
    left alone (its class's ``retention`` is not in the store, and the default is ``"all"``).
    With ``retention`` (``"since-snapshot"`` or a window), every actor named is compacted
    by that rule; this is the operator's decision, recorded (``by``) in each history.

    Never removes what recovery, ``verify``, ``history`` of the kept range, an in-doubt
    intent or message-id deduplication of the kept log needs (docs/recovery.md). Safe on a
    live store (each store call is one short transaction); a SQLite store can only be opened
    for writing while no runtime has it.

    Raises:
        ConfigurationError: a bad ``retention``, or a store that cannot compact.
        ActorNotFoundError: ``actor_id`` does not exist.
    """
    _codec.validate_optional_text(by, "by")
    rule = None if retention is None else _retention.parse(retention)
    if not isinstance(store, CompactingStore):
        raise ConfigurationError(f"the store {store.url} cannot compact logs")
    if actor_id is not None:
        if await store.get_actor(actor_id) is None:
            raise ActorNotFoundError(f"no actor {actor_id!r} in {store.url}")
        ids = [actor_id]
    else:
        ids = [a.actor_id for a in await store.list_actors()]
    who = by or _decisions.whoami()
    out = []
    for aid in ids:
        use = rule if rule is not None else await _own_retention(store, aid)
        if use is None or use == "all":
            row = await store.get_actor(aid)
            first = max(1, row.first_seq) if row is not None else 1
            out.append(CompactResult(aid, first, 0, "all", "retention is 'all'"))
            continue
        done = await _retention.compact(store, aid, use, by=who)
        out.append(
            CompactResult(aid, done.first_seq, done.removed, _retention.describe(use), done.reason)
        )
    return out


async def _own_retention(store: Store, actor_id: str) -> _retention.Retention | None:
    """The retention last saved with the actor (spawn options) or compacted with."""
    found = None
    for ev in await store.read_events(actor_id):
        if ev.kind not in (EventKind.OPTIONS, EventKind.COMPACTED) or ev.damage is not None:
            continue
        try:
            detail = json.loads(ev.detail)
        except ValueError:
            continue
        if isinstance(detail, dict) and "retention" in detail:
            found = _retention.saved(detail)
    return found
