"""This runtime's ownership as it changes: ``OwnershipChange`` and the feed of changes behind
``ActorSystem.ownership_changes`` (also logged and traced); the lease margin. The plain
``Lease`` record, which the operators read too, is in ``_journal/leases.py``."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Literal

import anyio
import attrs
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .._tracing import telemetry as _telemetry

__all__ = ["LEASE_MARGIN", "ChangeFeed", "ChangeKind", "OwnershipChange"]

logger = logging.getLogger("actorlog.ownership")

#: A tool starts only while at least this fraction of the lease is left: its last
#: confirmation began less than ``(1 - LEASE_MARGIN) x lease_ttl`` ago (docs/scaling.md).
LEASE_MARGIN = 0.25


ChangeKind = Literal["acquired", "taken_over", "lost", "released"]


@attrs.frozen
class OwnershipChange:
    """This runtime started or stopped owning an actor (``system.ownership_changes()``).

    Attributes:
        kind: ``acquired`` (placed here on use), ``taken_over`` (found with unfinished work
            and no live lease -- a dead or paused runtime's -- and recovered here), ``lost``
            (another runtime took it, or the lease could no longer be confirmed: the actor
            stopped here), ``released`` (let go: passivated, stopped, or shutdown).
        actor_id: the actor.
        token: the fencing token of the lease acquired, lost or released.
        reason: why, in words (for ``lost`` and ``released``).
    """

    kind: ChangeKind
    actor_id: str
    token: int | None
    reason: str = ""


class ChangeFeed:
    """This runtime's ownership changes, told to subscribers, the log and the tracer."""

    __slots__ = ("_watchers", "owner")

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._watchers: list[MemoryObjectSendStream[OwnershipChange]] = []

    def publish(self, change: OwnershipChange) -> None:
        for watcher in list(self._watchers):
            try:
                watcher.send_nowait(change)
            except anyio.WouldBlock:
                pass  # a subscriber that does not keep up misses changes, never blocks us
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._watchers.remove(watcher)
        if change.kind == "lost":
            logger.warning(
                "runtime %s lost actor %s (fencing token %s): %s; it stopped here",
                self.owner,
                change.actor_id,
                change.token,
                change.reason,
            )
        else:
            logger.debug(
                "runtime %s: %s actor %s (fencing token %s) %s",
                self.owner,
                change.kind,
                change.actor_id,
                change.token,
                change.reason,
            )
        _telemetry.ownership_changed(
            change.kind, change.actor_id, self.owner, change.token, change.reason
        )

    def subscribe(self) -> AsyncIterator[OwnershipChange]:
        """Every change from now on: subscribed at once, before the first ``__anext__``. A
        subscriber that falls 1000 changes behind misses the ones after."""
        send, receive = anyio.create_memory_object_stream[OwnershipChange](1000)
        self._watchers.append(send)
        return self._relay(send, receive)

    async def _relay(
        self,
        send: MemoryObjectSendStream[OwnershipChange],
        receive: MemoryObjectReceiveStream[OwnershipChange],
    ) -> AsyncIterator[OwnershipChange]:
        try:
            async with receive:
                async for change in receive:
                    yield change
        finally:
            if send in self._watchers:
                self._watchers.remove(send)
            send.close()

    def close(self) -> None:
        for watcher in self._watchers:
            watcher.close()


OwnershipChange.__module__ = "actorlog"  # its public name (imported lazily by actorlog)
