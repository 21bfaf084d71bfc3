"""Restarting a quarantined actor once its cause is fixed (``ActorSystem.restart``,
``actorlog restart``): the restart is recorded as a ``restarted`` event in the actor's
history, then the actor recovers with the code that runs now (docs/upgrading.md).

Also which finished cells ``spawn`` starts again without a restart (:func:`restartable`)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .._durability import decisions as _decisions
from .._journal import codec as _codec
from .._journal.errors import (
    ActorNotFoundError,
    ConfigurationError,
    CorruptEntryError,
    LeaseLostError,
    StoreCorruptError,
    StoreUnavailableError,
)
from .._journal.records import EventKind
from .._tracing import logs as _logs, traceends as _traceends

if TYPE_CHECKING:
    from .._effects.actor import Actor
    from .._effects.registry import Registry
    from ..store import Store
    from .cell import Cell

__all__ = ["quarantined_class", "restartable"]


async def quarantined_class(
    store: Store,
    registry: Registry,
    cells: dict[str, Cell],
    quarantined: dict[str, BaseException],
    actor_id: str,
    by: str | None,
    reason: str,
) -> type[Actor[Any]]:
    """Check that the actor is quarantined here, record its restart and forget the
    quarantine; return its class (the caller spawns it again).

    Raises:
        ActorNotFoundError: it is not quarantined in this system, or its class is not
            registered.
        ConfigurationError: it was quarantined for a damaged log; nothing written.
    """
    _codec.validate_actor_id(actor_id)
    cell = cells.get(actor_id)
    cls: type[Actor[Any]] | None
    if cell is not None and cell.status == "quarantined" and cell.done.is_set():
        # the class registered for its tag now (``system.register`` the fixed one), else
        # the one it ran with
        cls, error = registry.actor_class(cell.actor_type) or cell.cls, cell.error
    elif actor_id in quarantined:
        error = quarantined[actor_id]
        row = await store.get_actor(actor_id)
        cls = None if row is None else registry.actor_class(row.actor_type)
        if cls is None:
            raise ActorNotFoundError(
                f"actor {actor_id!r} cannot be restarted: its class "
                f"{None if row is None else row.actor_type!r} is not registered with this "
                "system (add it to actors=[...])"
            )
    else:
        status = "not loaded" if cell is None else cell.status
        raise ActorNotFoundError(
            f"actor {actor_id!r} is not quarantined in this system ({status}): nothing to "
            "restart (system.spawn starts an actor that is not running)"
        )
    if isinstance(error, (CorruptEntryError, StoreCorruptError)):
        raise ConfigurationError(
            f"actor {actor_id!r} was quarantined for a damaged log ({error}): a restart "
            "cannot help, refused, nothing written. Run 'actorlog verify' and deal with the "
            "damage first (docs/operators.md, 'Damage')"
        )
    found = _decisions.restarted_detail(by, reason, error)
    with _traceends.lifecycle_span("restart", actor_id, found["by"], reason):
        await store.record_event(actor_id, EventKind.RESTARTED, json.dumps(found))
    if cell is not None and cells.get(actor_id) is cell:
        del cells[actor_id]
    quarantined.pop(actor_id, None)
    _logs.quarantine.info(
        "actor %s restarted by %s (was quarantined: %s)", actor_id, found["by"], error
    )
    return cls


def restartable(cell: Cell) -> bool:
    """A finished cell that spawning starts again: it stopped cleanly, or a store failure
    (possibly transient: disk full, lock timeout, I/O error) stopped it, or it lost its
    lease to another runtime (spawning takes the lease again if it is free, else reaches the
    actor where it runs). Recovery reads the truth back from the store; a damaged log or a
    conflict stays stopped."""
    if not cell.is_done:  # ``cell.done.is_set()``
        return False
    return (
        cell.error is None
        or isinstance(cell.error, (StoreUnavailableError, LeaseLostError))
        or isinstance(cell.journal.broken, StoreUnavailableError)
    )
