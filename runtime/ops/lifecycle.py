"""The operator's lifecycle writes: :func:`cancel` a running step, :func:`terminate` an
actor, :func:`delete` an ended one; and :func:`deleted`, the store's audit of deletions.

Where they act (docs/operators.md, "Ending actors"):

* **PostgreSQL** (a store with leases): live. ``cancel`` and ``terminate`` record their
  event and queue a command in the actor's inbox; the runtime that owns the actor acts on it
  at once (its running step is cancelled; a terminated actor takes no more steps). Without a
  live owner, the next runtime to take the actor acts on the recorded event.
* **SQLite**: offline. A running runtime holds the file (``StoreLockedError``): stop it, or
  call ``system.cancel`` / ``terminate`` / ``delete`` in that process. Offline, ``cancel``
  is recorded and acted on when a runtime next resumes the actor's interrupted step (a
  request with no step in progress then is dropped, see :func:`cancel`); ``terminate`` holds
  at the next start.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from .._durability import decisions as _decisions, lifecycle as _lifecycle
from .._journal import codec as _codec
from .._journal.errors import ConfigurationError
from ..store import AuditStore, Store
from .reads import _actor_row, _status, leases
from .verify import refuse_damaged

__all__ = ["DeleteRefusedError", "Deleted", "cancel", "delete", "deleted", "terminate"]


@attrs.define
class Deleted:
    """An actor deleted from the store (its audit row, :meth:`AuditStore.read_audit`).

    ``ended``: ``finished`` or ``terminated`` as it was when deleted, or None if it was
    deleted by force before it ended."""

    actor_id: str
    at: float
    by: str
    reason: str
    actor_type: str
    last_seq: int
    ended: str | None
    forced: bool
    audit_id: int


class DeleteRefusedError(ConfigurationError):
    """``delete`` without the confirmation it needs (``yes`` for an ended actor, ``force``
    for one that has not ended). Nothing was deleted.

    Attributes:
        actor_id: the actor.
        status: its status (``finished``, ``terminated``, ``idle``, ...).
        needs: ``"yes"`` or ``"force"``.
    """

    def __init__(self, actor_id: str, status: str, needs: str, message: str) -> None:
        self.actor_id = actor_id
        self.status = status
        self.needs = needs
        super().__init__(message)


async def cancel(store: Store, actor_id: str, *, by: str | None = None, reason: str = "") -> None:
    """Ask for the actor's running step to be cancelled: a ``cancel_requested`` event, and on
    a store with leases an inbox command that the owning runtime acts on at once (the step's
    running tool call is recorded cancelled, a write tool's as in doubt; the step is recorded
    failed with ``StepCancelledError``). Without an owner running it, the request waits for
    the next runtime that resumes an interrupted step of this actor; a later completed
    cancel or a new request replaces it.

    Raises:
        ConfigurationError: the actor's log is damaged (``verify``); nothing written.
        ActorNotFoundError: no such actor (or it was deleted).
    """
    _codec.validate_optional_text(by, "by")
    _codec.validate_text(reason, "reason")
    await _exists(store, actor_id)
    await refuse_damaged(store, actor_id, "cancel")
    await _lifecycle.cancel_offline(store, actor_id, by=by or _decisions.whoami(), reason=reason)


async def terminate(
    store: Store, actor_id: str, *, by: str | None = None, reason: str = ""
) -> None:
    """End the actor for good: a ``terminated`` event (and on a store with leases an inbox
    command to its owner, which cancels a running step). From then on no step runs: every
    message, also those already queued, gets ``ActorFinishedError``. Its log stays for audit
    until :func:`delete`. Terminating an actor that already ended changes nothing.

    Raises:
        ConfigurationError: the actor's log is damaged (``verify``); nothing written.
        ActorNotFoundError: no such actor (or it was deleted).
    """
    _codec.validate_optional_text(by, "by")
    _codec.validate_text(reason, "reason")
    await _exists(store, actor_id)
    if _lifecycle.ended(await store.read_events(actor_id)) is not None:
        return
    await refuse_damaged(store, actor_id, "terminate", hint="; 'delete --force' removes it")
    await _lifecycle.terminate_offline(store, actor_id, by=by or _decisions.whoami(), reason=reason)


async def delete(
    store: Store,
    actor_id: str,
    *,
    yes: bool = False,
    force: bool = False,
    by: str | None = None,
    reason: str = "",
) -> Deleted:
    """Delete the actor's log, snapshots and history, leaving a store-level audit row
    (:func:`deleted` lists them). A finished or terminated actor needs ``yes``; one that has
    not ended needs ``force`` (its unfinished work is lost). Refused while a runtime holds
    the actor's lease and it has not ended (terminate it first). An actor whose log is
    damaged (``verify``) needs ``force``.

    Raises:
        DeleteRefusedError: the confirmation it needs was not given; nothing deleted.
        ConfigurationError: the actor runs in a runtime now, its log is damaged and
            ``force`` was not given, or the store cannot delete.
        ActorNotFoundError: no such actor (or it was deleted).
    """
    _codec.validate_actor_id(actor_id)
    _codec.validate_optional_text(by, "by")
    _codec.validate_text(reason, "reason")
    if not isinstance(store, AuditStore):
        raise ConfigurationError(
            f"{type(store).__name__} cannot delete actors (it lacks delete_actor/read_audit)"
        )
    row = await _exists(store, actor_id)
    if not force:
        await refuse_damaged(store, actor_id, "delete", hint="; --force deletes it anyway")
    status = (await _status(store, row)).status
    ended = status in ("finished", "terminated")
    if not ended:
        held = [lease for lease in await leases(store) if lease.actor_id == actor_id]
        if held and held[0].live:
            raise ConfigurationError(
                f"actor {actor_id!r} runs in runtime {held[0].owner!r} now and has not "
                "ended: terminate it first (actorlog terminate), then delete it"
            )
        if not force:
            raise DeleteRefusedError(
                actor_id,
                status,
                "force",
                f"actor {actor_id!r} is {status}, not finished or terminated: deleting it "
                "loses its unfinished work. Terminate it first, or force the deletion "
                "(--force)",
            )
    elif not yes and not force:
        raise DeleteRefusedError(
            actor_id,
            status,
            "yes",
            f"actor {actor_id!r} is {status}; deleting removes its log, snapshots and "
            "history for good (an audit row stays): confirm with --yes",
        )
    audit = await _lifecycle.delete_actor(
        store, actor_id, by=by or _decisions.whoami(), reason=reason, force=force
    )
    return _deleted(audit.id, audit.at, audit.actor_id, audit.detail)


async def deleted(store: Store, actor_id: str | None = None) -> list[Deleted]:
    """The actors deleted from the store (of one id, or all), oldest first; empty for a
    store without the optional audit API."""
    if actor_id is not None:
        _codec.validate_actor_id(actor_id)
    if not isinstance(store, AuditStore):
        return []
    return [
        _deleted(r.id, r.at, r.actor_id, r.detail)
        for r in await store.read_audit(actor_id)
        if r.kind == "deleted"
    ]


def _deleted(audit_id: int, at: float, actor_id: str, detail: str) -> Deleted:
    try:
        d: Any = json.loads(detail)
    except ValueError:
        d = {}
    d = d if isinstance(d, dict) else {}
    last_seq = d.get("last_seq")
    return Deleted(
        actor_id=actor_id,
        at=at,
        by=str(d.get("by", "")),
        reason=str(d.get("reason", "")),
        actor_type=str(d.get("actor_type", "")),
        last_seq=last_seq if isinstance(last_seq, int) else 0,
        ended=None if d.get("ended") is None else str(d.get("ended")),
        forced=bool(d.get("forced", False)),
        audit_id=audit_id,
    )


async def _exists(store: Store, actor_id: str) -> Any:
    _codec.validate_actor_id(actor_id)
    return await _actor_row(store, actor_id)  # ActorNotFoundError, saying if it was deleted
