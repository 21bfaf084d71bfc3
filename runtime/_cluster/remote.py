"""Asks of actors owned by another runtime: waiting for the reply their step records.

A remote ``ask`` queues its message in the owner's inbox (``Ownership.post_remote``) and
waits here. It reads the step of the message from the log: at once, whenever a reply
notification wakes it (``store.listen_replies``; PostgreSQL ``LISTEN actorlog_reply``), and
every ``reply_poll_interval`` as a fallback (notifications can be lost); without a listener
it polls with back-off from 5 ms up to ``poll_interval``.

The owner's side is :class:`ReplyAnnouncer`: once the step of a message from the inbox is
durable, it announces it (``store.notify_replies``, batched; PostgreSQL ``NOTIFY
actorlog_reply``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio

from .._durability import reuse as _reuse
from .._durability.mailbox import Reply, step_outcome
from .._journal import codec as _codec
from .._journal.errors import ActorlogError, ActorQuarantinedError, CorruptEntryError, HandlerError
from .._journal.records import EntryKind, StepRecord, decode_entry
from ..store import EventRow, ReplyStore, Store

__all__ = ["RemoteAsks", "ReplyAnnouncer"]


def _quarantined(events: list[EventRow]) -> str | None:
    """Why the actor is quarantined, if its newest quarantine is not followed by a recovery
    (an operator's repair and restart), else None."""
    why = None
    for ev in events:
        if ev.damage is not None:
            continue
        if ev.kind == "quarantined":
            try:
                detail = json.loads(ev.detail)
            except ValueError:
                detail = {}
            why = str(detail.get("error", "")) if isinstance(detail, dict) else ""
            why = why or "see its history (actorlog history)"
        elif ev.kind == "recovered":
            why = None
    return why


class _Ask:
    """One remote ``ask`` waiting for its step: woken by a reply notification."""

    __slots__ = ("actor_id", "given", "message_id", "woken")

    def __init__(self, actor_id: str, message_id: str, given: tuple[str, Any] | None) -> None:
        self.actor_id = actor_id
        self.message_id = message_id
        #: the asked message (type tag, plain body) when the caller chose its id: the
        #: message logged under that id must be this one (``_reuse``)
        self.given = given
        self.woken = anyio.Event()


class RemoteAsks:
    """The asks of this runtime waiting for steps on other runtimes."""

    def __init__(
        self,
        store: Store,
        replies: ReplyStore | None,
        *,
        poll_interval: float,
        reply_poll_interval: float,
    ) -> None:
        self.store = store
        self._replies = replies
        self.poll_interval = poll_interval
        self.reply_poll_interval = reply_poll_interval
        #: asks waiting here: actor id -> message id -> waiters
        self.asks: dict[str, dict[str, list[_Ask]]] = {}
        self._stop: Callable[[], Awaitable[None]] | None = None

    async def start(self) -> None:
        """Listen for reply notifications (if the store can send them)."""
        if self._replies is not None:
            try:
                self._stop = await self._replies.listen_replies(self.notified)
            except ActorlogError:
                self._stop = None  # asks poll

    async def stop(self) -> None:
        stop, self._stop = self._stop, None
        if stop is not None:
            await stop()

    def notified(self, actor_id: str | None, message_id: str | None) -> None:
        """A reply notification: wake the asks waiting on it (all of the actor's without a
        message id; every ask when the listener reconnected)."""
        if actor_id is None:
            groups = list(self.asks.values())
        else:
            by_message = self.asks.get(actor_id)
            if not by_message:
                return
            if message_id is None:
                groups = [by_message]
            else:
                waiting = by_message.get(message_id)
                if waiting:
                    for ask in waiting:
                        ask.woken.set()
                return
        for group in groups:
            for waiting in group.values():
                for ask in waiting:
                    ask.woken.set()

    @contextlib.contextmanager
    def waiting(
        self, actor_id: str, message_id: str, given: tuple[str, Any] | None = None
    ) -> Iterator[_Ask]:
        """Register an ask before its message is queued (no notification is missed), and
        withdraw it when the caller stops waiting."""
        ask = _Ask(actor_id, message_id, given)
        waiting = self.asks.setdefault(actor_id, {}).setdefault(message_id, [])
        waiting.append(ask)
        try:
            yield ask
        finally:
            waiting.remove(ask)
            by_message = self.asks.get(actor_id)
            if by_message is not None and not waiting:
                by_message.pop(message_id, None)
                if not by_message:
                    del self.asks[actor_id]

    async def reply(self, ask: _Ask, reply_type: Any, registry: Any = None) -> Any:
        """The reply of the asked message's step (or its ``HandlerError``), once logged.

        Raises ``MessageIdReusedError`` if the message logged under the ask's id is not the
        one asked (``ask.given``, compared with ``registry``'s classes)."""
        actor_id, message_id = ask.actor_id, ask.message_id
        store = self.store
        delay = 0.005
        seq: int | None = None
        checked = anyio.current_time()
        while True:
            if ask.woken.is_set():
                ask.woken = anyio.Event()  # re-armed before reading: no wake-up is lost
            if seq is None:
                row = await store.find_message(actor_id, message_id)
                if row is not None:
                    _codec.verify_row(row, actor_id, row.seq)
                    if ask.given is not None and registry is not None:
                        logged = _reuse.logged_message(row)
                        _reuse.check_same_message(
                            registry, actor_id, message_id, row.seq, logged, ask.given
                        )
                    seq = row.seq
            if seq is not None:
                for step in await store.find_ref(actor_id, EntryKind.STEP, seq):
                    _codec.verify_row(step, actor_id, step.seq)
                    record = decode_entry(step)
                    if not isinstance(record, StepRecord):
                        raise CorruptEntryError(actor_id, step.seq, "decode", "not a step")
                    value, error = step_outcome(actor_id, seq, record, reply_type)
                    if error is not None:
                        raise error
                    return value
            if seq is None and anyio.current_time() - checked >= self.reply_poll_interval:
                # not logged yet: an owner holding a quarantined actor never takes it in, so
                # the caller gets the typed error (the message stays queued for after the
                # operator's repair) instead of waiting for ever
                checked = anyio.current_time()
                why = _quarantined(await store.read_events(actor_id))
                if why is not None:
                    raise ActorQuarantinedError(actor_id, why)
            if self._stop is None:
                await anyio.sleep(delay)
                delay = min(delay * 2, self.poll_interval)
                continue
            with anyio.move_on_after(self.reply_poll_interval):
                await ask.woken.wait()


class ReplyAnnouncer:
    """An owner's reply notifications: the replies of inbox messages, announced in batches
    once their steps are durable, so that the asking runtime's :class:`RemoteAsks` wakes."""

    def __init__(self, replies: ReplyStore | None) -> None:
        self._replies = replies
        #: durable steps of inbox messages not yet announced, and the announcer's wake-up
        self._queued: list[tuple[str, str]] = []
        self._wake = anyio.Event()

    def queue(self, actor_id: str, message_id: str) -> None:
        """Announce the reply of ``message_id`` (its step is durable) with the next batch."""
        self._queued.append((actor_id, message_id))
        self._wake.set()

    async def when_done(self, actor_id: str, message_id: str, slot: Reply) -> None:
        """Queue the announcement of a remote message's reply once its step is durable."""
        try:
            await slot.wait()
        except HandlerError:
            pass  # a recorded error is a reply too
        except Exception:
            return  # stopped before its step: whoever handles it later has no announcement
        self.queue(actor_id, message_id)

    async def loop(self) -> None:
        """Send queued announcements, batched: those queued while one is sent go together."""
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            await self.send()

    async def send(self) -> None:
        """Send the announcements queued so far (failures are left to the asks' polling)."""
        batch, self._queued = self._queued, []
        if batch and self._replies is not None:
            try:
                await self._replies.notify_replies(batch)
            except Exception:
                pass  # the asks find the replies by polling
