"""The runtime as its cells and its ownership see it: ``CellHost`` and ``OwnershipHost``.

The ``ActorSystem`` wires one :class:`Host` with the parts it shares (the store, the type
registry, the table of loaded cells, spawn options, recovery costs) and the few operations
a cell may ask of it (deliver, spawn, forget a passivated cell, run a background task).
Cells and ownership talk to the host, never to the system's attributes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from .._durability.snapshots import RecoveryCost
from .._journal.errors import ActorStoppedError

if TYPE_CHECKING:
    from .._cluster.ownership import Ownership
    from .._core.cell import Cell
    from .._durability.snapshots import SnapshotPolicy
    from .._durability.timers import Timers
    from .._effects.actor import Actor
    from .._effects.ref import ActorRef
    from .._effects.registry import Registry
    from .._journal.door import Letter
    from ..store import Store, TimerRow
    from .options import SpawnOptions

__all__ = ["Host"]


class Host:
    """What the system shares with its cells and its ownership (see the module doc)."""

    __slots__ = (
        "_closing",
        "_deliver",
        "_forget",
        "_ref",
        "_spawn",
        "_spawn_task",
        "cells",
        "costs",
        "options",
        "ownership",
        "registry",
        "store",
        "timers",
    )

    def __init__(
        self,
        *,
        store: Store,
        registry: Registry,
        cells: dict[str, Cell],
        options: SpawnOptions,
        closing: Callable[[], bool],
        forget: Callable[[Cell], None],
        spawn_task: Callable[..., None],
        deliver: Callable[..., Awaitable[Any]],
        spawn: Callable[..., Awaitable[ActorRef[Any]]],
        ref: Callable[..., ActorRef[Any]],
    ) -> None:
        self.store = store
        self.registry = registry
        self.cells = cells
        self.options = options
        #: with leases: this runtime's ownership (set once the system has made it)
        self.ownership: Ownership | None = None
        #: the runtime's timers (set once the system has made them)
        self.timers: Timers | None = None
        #: the recovery-cost model shared by the actors of one class
        self.costs: dict[str, RecoveryCost] = {}
        self._closing = closing
        self._forget = forget
        self._spawn_task = spawn_task
        self._deliver = deliver
        self._spawn = spawn
        self._ref = ref

    @property
    def closing(self) -> bool:
        return self._closing()

    def recovery_cost(self, actor_type: str) -> RecoveryCost:
        cost = self.costs.get(actor_type)
        if cost is None:
            cost = self.costs[actor_type] = RecoveryCost()
        return cost

    def lease_token(self, actor_id: str) -> int:
        own = self.ownership
        return 0 if own is None else own.tokens.get(actor_id, 0)

    def check_lease(self, actor_id: str, token: int) -> None:
        if self.ownership is not None:
            self.ownership.check_lease(actor_id, token)

    def adopt_options(
        self, cls: type[Actor[Any]], actor_id: str, saved: dict[str, Any]
    ) -> SnapshotPolicy | None:
        return self.options.adopt(cls, actor_id, saved)

    def forget(self, cell: Cell) -> None:
        self._forget(cell)

    def spawn_task(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        self._spawn_task(fn, *args)

    async def deliver(
        self, ref: ActorRef[Any], letter: Letter, *, message_id: str, sender: str
    ) -> None:
        await self._deliver(
            ref.cls, ref.actor_id, letter, message_id=message_id, sender=sender, want_reply=False
        )

    async def spawn(self, cls: type[Any], actor_id: str, **options: Any) -> ActorRef[Any]:
        return await self._spawn(cls, actor_id, **options)

    def ref(self, cls: type[Any], actor_id: str) -> ActorRef[Any]:
        return self._ref(cls, actor_id)

    async def put_timer(self, row: TimerRow) -> None:
        if self.timers is None:
            raise ActorStoppedError("the ActorSystem is not running")
        await self.timers.put(row)

    def loaded(self, actor_id: str) -> Cell | None:
        return self.cells.get(actor_id)
