"""The timer index of the store protocol: ``TimerRow`` and ``TimerStore`` (send_later and
schedules, ``capabilities.timers``; FORMAT.md "timers").

Public through ``actorlog.store``, which re-exports both (and shows them as
``actorlog.store.X``); stores import them from there.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

__all__ = ["TimerRow", "TimerStore"]


class TimerRow(NamedTuple):
    """A timer as a store keeps it (:class:`TimerStore`; FORMAT.md "timers").

    Attributes:
        timer_id: unique per store (``send_later``: derived from the sending step or the
            caller's message id; a schedule: ``schedule:<name>``).
        actor_id: the addressee.
        actor_type: the addressee's class tag (the actor may not exist yet when it fires).
        due: when it fires next, in seconds since the epoch (UTC).
        message_id: the message id of the delivery (of a schedule: its prefix; each firing
            appends its time).
        type_tag: the message class tag.
        body: the message, cattrs-unstructured, as a JSON text.
        sender: the sending actor's id, or None.
        recurrence: None for a one-off timer; for a schedule a JSON object
            (``{"every": seconds}`` or ``{"cron": "..."}``, with ``"missed"``).
        state: ``pending``; ``firing`` (claimed by :meth:`TimerStore.claim_timer`: being
            delivered, or delivered and not yet marked); ``fired``; ``cancelled``; or
            ``failed: <reason>`` (settled as undeliverable by :meth:`TimerStore.fail_timer`).
            A reader (:meth:`TimerStore.list_timers`, :meth:`TimerStore.due_timers`) returns
            a damaged row as ``damaged: <what>`` (bad times as NaN, bad values as text)
            rather than failing for the whole store.
        created_at: when it was first put (seconds since the epoch).
    """

    timer_id: str
    actor_id: str
    actor_type: str
    due: float
    message_id: str
    type_tag: str
    body: str
    sender: str | None
    recurrence: str | None
    state: str
    created_at: float


class TimerStore(Protocol):
    """The timer index of a store with ``capabilities.timers``.

    Durable like appends; a fired or cancelled timer keeps its row (``state``) until
    :meth:`delete_timers_before` removes it, so that ``cancel_timer`` can say it came too
    late. On a store with leases, :meth:`fire_timer` is fenced like an append: a runtime
    that lost the actor's lease (:meth:`LeaseStore.set_fence`) cannot mark its timer fired.
    """

    async def put_timer(self, timer: TimerRow, *, replace: bool = False) -> bool:
        """Insert a pending timer; return True if inserted. A timer with this id that
        exists (pending, fired or cancelled) is kept as it is and False returned, unless
        ``replace`` (schedules: a new definition under the same name)."""
        ...

    async def get_timer(self, timer_id: str) -> TimerRow | None:
        """The timer with this id, in any state, or None."""
        ...

    async def cancel_timer(self, timer_id: str) -> str | None:
        """Cancel a pending timer, in one atomic decision with :meth:`claim_timer`.
        Returns the state it had: ``pending`` if this call cancelled it; ``firing``,
        ``fired``, ``cancelled`` or ``failed: ...`` if it was too late (a one-off timer in
        ``firing`` is left to fire); None if unknown. A schedule (``recurrence`` set) is
        cancelled from ``pending`` and from ``firing`` (the firing under way may still be
        delivered; no later one is)."""
        ...

    async def claim_timer(self, timer_id: str, due: float) -> bool:
        """Claim the due firing of ``timer_id`` at ``due`` before delivering it: move it from
        ``pending`` to ``firing``, in one atomic decision with :meth:`cancel_timer` (a
        conditional update of the row). True if this call claimed it, or it was already
        ``firing`` at ``due`` (a claim whose delivery did not finish: a crash); False if it
        was cancelled, fired, settled, moved to another due time or removed. The runtime
        delivers only a firing whose claim returned True."""
        ...

    async def fire_timer(self, timer_id: str, due: float, next_due: float | None) -> bool:
        """After delivering the claimed firing of ``timer_id`` at ``due``: mark it fired
        (``next_due`` None) or move it back to ``pending`` at ``next_due`` (a schedule).
        Only if it is still ``firing`` (or ``pending``) at ``due``; returns whether it
        changed it."""
        ...

    async def fail_timer(self, timer_id: str, due: float, reason: str) -> bool:
        """Settle a claimed timer (or schedule) that cannot be delivered: its state becomes
        ``failed: <reason>`` and it never fires. Only if it is still ``firing`` (or
        ``pending``) at ``due``; returns whether it changed it."""
        ...

    async def due_timers(
        self, before: float, *, limit: int = 100, owner: str | None = None
    ) -> list[TimerRow]:
        """Pending (and claimed, ``firing``) timers with ``due <= before``, earliest first
        (through the index). With
        ``owner`` (stores with leases): only those of actors whose live lease ``owner``
        holds or that have no live lease."""
        ...

    async def next_due(self) -> float | None:
        """The earliest due time of a pending (or ``firing``) timer, or None."""
        ...

    async def list_timers(self, actor_id: str | None = None) -> list[TimerRow]:
        """Timers in any state (of one addressee, or all), by due time (operators)."""
        ...

    async def delete_timers_before(self, before: float) -> int:
        """Delete fired, cancelled and failed timers due before ``before``; return how
        many."""
        ...
