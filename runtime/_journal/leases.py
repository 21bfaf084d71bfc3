"""A lease as the store reports it: ``Lease`` (public as :class:`actorlog.Lease`), read by
``ActorSystem.ownership`` and by the operators' ``actorlog.ops.leases`` alike, from a store
with ``capabilities.leases`` (docs/scaling.md). A plain record: the runtime's ownership
(``_cluster``) and its feed of changes live above it."""

from __future__ import annotations

import attrs

__all__ = ["Lease"]


@attrs.frozen
class Lease:
    """Who owns an actor, as the store says (``system.ownership``, ``actorlog.ops.leases``).

    Attributes:
        actor_id: the actor.
        owner: the runtime holding the lease (its ``owner=`` name), or None if released.
        token: the fencing token of the lease (grows with every change of owner).
        expires_in: seconds until the lease expires, on the database's clock (<= 0: expired,
            free to take).
    """

    actor_id: str
    owner: str | None
    token: int
    expires_in: float

    @property
    def live(self) -> bool:
        """Held by a runtime right now (not released, not expired)."""
        return self.owner is not None and self.expires_in > 0


Lease.__module__ = "actorlog"  # its public name (imported lazily by actorlog)
