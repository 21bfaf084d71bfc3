"""Passivation: one policy for taking idle actors out of memory, with or without leases.

An actor idle for ``passivate_after`` seconds, and (without leases) the least recently used
idle ones while more than ``max_actors`` are loaded, are passivated: the cell writes a
snapshot if anything changed since its last one, then leaves memory; its next message
recovers it from that snapshot. With leases (``ActorSystem(owner=...)``) the system then
releases the actor's lease (``max_actors`` is enforced there when an actor is placed, not
here). The cells are reached through the small interface below, never through the system.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Protocol

import anyio

__all__ = ["Passivatable", "Passivator"]


class Passivatable(Protocol):
    """What the passivator needs of a loaded actor (``Cell``)."""

    last_active: float

    def is_idle(self) -> bool: ...

    def passivate(self) -> None: ...


class Passivator:
    """Chooses idle actors to passivate and tells them to (the loop runs in the system's
    task group)."""

    def __init__(
        self,
        cells: Callable[[], Iterable[Passivatable]],
        loaded: Callable[[], int],
        *,
        passivate_after: float | None,
        max_actors: int | None,
    ) -> None:
        self._cells = cells
        self._loaded = loaded
        self.passivate_after = passivate_after
        self.max_actors = max_actors
        self._wake: anyio.Event | None = None

    @property
    def needed(self) -> bool:
        return self.passivate_after is not None or self.max_actors is not None

    def over_limit(self) -> None:
        """More actors were loaded than ``max_actors``: look at once."""
        wake, limit = self._wake, self.max_actors
        if wake is not None and limit is not None and self._loaded() > limit:
            wake.set()

    def choose(self, now: float) -> list[Passivatable]:
        """The idle actors to passivate now: those idle too long, then the least recently
        used while more than ``max_actors`` are loaded."""
        idle = sorted((c for c in self._cells() if c.is_idle()), key=lambda c: c.last_active)
        after = self.passivate_after
        chosen = [c for c in idle if after is not None and now - c.last_active >= after]
        if self.max_actors is not None:
            excess = self._loaded() - self.max_actors
            for c in idle:
                if len(chosen) >= excess:
                    break
                if c not in chosen:
                    chosen.append(c)
        return chosen

    async def run(self) -> None:
        period = 0.25 if self.passivate_after is None else min(0.25, self.passivate_after / 2)
        while True:
            self._wake = wake = anyio.Event()
            with anyio.move_on_after(period):
                await wake.wait()
            for cell in self.choose(time.monotonic()):
                cell.passivate()
