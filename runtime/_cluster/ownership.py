"""Ownership of actors across runtimes: leases, fencing, remote delivery (docs/scaling.md).

Active when ``ActorSystem(store, owner=...)`` runs over a store with
``StoreCapabilities.leases`` (PostgreSQL). Then:

* **Before an actor is recovered** here, this runtime takes its lease
  (``store.acquire_lease``) and registers the new fencing token with the store, which sends it
  with every append of the actor; the database rejects appends with an older token. If another
  runtime holds a live lease, the actor stays there and this runtime talks to it remotely.
* **Renewal**: every ``lease_ttl / 3`` seconds one statement renews every lease held. An actor
  whose lease was taken over is stopped at once (``LeaseLostError``); if renewals keep failing
  (store unreachable) until the leases may have expired, every actor is stopped: another
  runtime may own them by now. A step that was already writing is rejected by its token.
* **Remote delivery**: ``send``/``ask`` to an actor owned elsewhere queue the message in the
  store's inbox (durable, once per message id) and notify the owner (LISTEN/NOTIFY; owners also
  poll every ``poll_interval``). The owner logs it with its normal ``post`` (deduplicated by
  message id) and deletes it from the inbox. Once the step of such a message is durable the
  owner announces it (``store.notify_replies``, batched; PostgreSQL: ``NOTIFY
  actorlog_reply``); the asking runtime's listener (``store.listen_replies``) wakes exactly
  the ``ask`` waiting on it, which reads the step from the log and decodes the recorded
  reply or error. Asks also look every ``reply_poll_interval`` (notifications can be lost),
  and after the listener reconnects; without a listener they poll as before.
* **Take-over**: every ``lease_ttl / 2`` seconds the runtime looks for actors with unfinished
  work (unhandled or queued messages) and no live lease -- a dead runtime's -- and recovers
  the ones whose class it runs.

Placement: an unowned actor goes to the first runtime that needs it (spawn, send, ask, or the
take-over scan) unless that runtime already runs ``max_actors``. An actor passivated here
(``passivate_after``, see ``_passivation``) has its lease released.

This module reaches the runtime through :class:`OwnershipHost` (the ``ActorSystem``), never
through its private attributes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup

from .._durability import lifecycle as _lifecycle, reuse as _reuse, rulings as _rulings
from .._effects.actor import Actor, reply_type
from .._journal import codec as _codec
from .._journal.door import Letter, admit_message, undecodable
from .._journal.errors import (
    ActorlogError,
    ConfigurationError,
    LeaseLostError,
    MessageIdReusedError,
    SequenceConflictError,
)
from .._journal.leases import Lease
from .._journal.records import EntryKind
from ..store import LeaseStore, ReplyStore, Store
from .leases import LEASE_MARGIN, ChangeFeed, ChangeKind, OwnershipChange
from .remote import RemoteAsks, ReplyAnnouncer

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from .._core.cell import Cell
    from .._effects.registry import Registry

__all__ = ["Ownership", "OwnershipHost"]

logger = logging.getLogger("actorlog.ownership")

#: Seconds at most that a runtime which found an actor's lease held by another runtime routes
#: to that actor through the inbox without asking the store again (a third of the lease time
#: if shorter): a send stream to a remote actor takes the lease row's lock once per window,
#: not once per message.
FOREIGN_RECHECK = 1.0


class OwnershipHost(Protocol):
    """What ownership needs of the runtime it serves (the ``ActorSystem``)."""

    store: Store
    registry: Registry

    def loaded(self, actor_id: str) -> Cell | None:
        """The actor's cell in memory here (running or finished), or None."""
        ...

    async def spawn(self, cls: type[Any], actor_id: str) -> Any:
        """Start the actor here (taking its lease) or find where it runs."""
        ...


class Ownership:
    def __init__(
        self,
        system: OwnershipHost,
        owner: str,
        lease_ttl: float,
        *,
        poll_interval: float = 0.25,
        reply_poll_interval: float | None = None,
        max_actors: int | None = None,
        client: bool = False,
    ) -> None:
        if not lease_ttl > 0:
            raise ConfigurationError(f"lease_ttl must be > 0, got {lease_ttl!r}")
        if max_actors is not None and max_actors < 1:
            raise ConfigurationError(f"max_actors must be >= 1, got {max_actors!r}")
        self.max_actors = max_actors
        #: client mode: own no actor, place none, take none over; only send and ask
        self.client = client
        #: (client mode) actors whose row this client has registered, so owners place them
        self._registered: set[str] = set()
        #: wakes the take-over scan early: a message was queued for an actor nobody holds
        self._scan_wake = anyio.Event()
        #: subscribers of ownership_changes()
        self.feed = ChangeFeed(owner)
        #: actors the take-over scan is taking over now (their change is ``taken_over``)
        self._taking_over: set[str] = set()
        #: monotonic time each owned actor was last used here (routing, inbox delivery)
        self._used: dict[str, float] = {}
        #: actors whose lease another runtime held when we last tried, and until when we
        #: route to them through the inbox without asking the store again (a send stream
        #: to a remote actor must not take the lease row's lock once per message)
        self._foreign: dict[str, float] = {}
        self._claim_lock = anyio.Lock()
        #: actor ids passivated (for tests and operators)
        self.passivated: list[str] = []
        self.system = system
        self.store: LeaseStore = system.store  # type: ignore[assignment]  # checked by caller
        self.owner = owner
        self.ttl = float(lease_ttl)
        self.poll_interval = poll_interval
        store: Any = system.store
        self._replies: ReplyStore | None = (
            store
            if callable(getattr(store, "notify_replies", None))
            and callable(getattr(store, "listen_replies", None))
            else None
        )
        #: this runtime's asks of actors owned elsewhere, woken by reply notifications
        self.remote = RemoteAsks(
            system.store,
            self._replies,
            poll_interval=poll_interval,
            #: how often a remote ``ask`` looks at the log when no notification came (a
            #: fallback: notifications can be lost); default ``4 x poll_interval`` (1 s)
            reply_poll_interval=(
                4 * poll_interval if reply_poll_interval is None else reply_poll_interval
            ),
        )
        #: announces the replies of inbox messages once their steps are durable
        self.announcer = ReplyAnnouncer(self._replies)
        self._tg: TaskGroup | None = None
        self.tokens: dict[str, int] = {}
        self._wake = anyio.Event()
        self._stop_listening: Callable[[], Awaitable[None]] | None = None
        self._last_renewed = time.monotonic()
        #: monotonic time each held lease was last confirmed (acquire or renew started)
        self._renewed: dict[str, float] = {}
        #: actor ids stopped because their lease was lost (for tests and operators)
        self.lost: list[str] = []

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self, tg: TaskGroup) -> None:
        await self.remote.start()
        self._tg = tg
        if self.client:
            return  # no leases, no inbox, no take-over: asks wait for replies only
        try:
            self._stop_listening = await self.store.listen_inbox(self._notified)
        except ActorlogError:
            self._stop_listening = None  # polling still delivers
        if self._replies is not None:
            tg.start_soon(self.announcer.loop, name=f"actorlog:replies:{self.owner}")
        tg.start_soon(self._renew_loop, name=f"actorlog:leases:{self.owner}")
        tg.start_soon(self._inbox_loop, name=f"actorlog:inbox:{self.owner}")
        tg.start_soon(self._takeover_loop, name=f"actorlog:takeover:{self.owner}")

    async def stop(self) -> None:
        """Stop listening and give up every lease (after the actors' last flush)."""
        with anyio.CancelScope(shield=True):
            self._tg = None
            with anyio.move_on_after(self.ttl / 3):
                await self.announcer.send()  # replies of the last steps
            await self.remote.stop()
            if self._stop_listening is not None:
                await self._stop_listening()
            self._stop_listening = None
            for actor_id, token in list(self.tokens.items()):
                try:
                    await self.store.release_lease(actor_id, self.owner, token)
                except Exception:
                    pass  # it expires anyway
                self._changed(OwnershipChange("released", actor_id, token, "shutdown"))
            self.tokens.clear()
            self.feed.close()

    def _notified(self, actor_id: str) -> None:
        if actor_id in self.tokens:
            self._wake.set()
        elif self._foreign.get(actor_id, 0.0) <= time.monotonic():
            # Perhaps nobody holds it (a client's first message to it): place it now
            # rather than at the next periodic scan.
            self._scan_wake.set()

    # -- leases ----------------------------------------------------------------------------

    async def claim(self, actor_id: str) -> bool:
        """Take the actor's lease (before recovering it here). False: another runtime owns it
        (or this is a client, which owns nothing)."""
        if self.client:
            return False
        if self.max_actors is None:
            return await self._claim(actor_id)
        async with self._claim_lock:  # count and take together: never above max_actors
            if actor_id not in self.tokens and len(self.tokens) >= self.max_actors:
                return False  # full: the actor is placed on (or reached at) another runtime
            return await self._claim(actor_id)

    async def _claim(self, actor_id: str) -> bool:
        t0 = time.monotonic()
        token = await self.store.acquire_lease(actor_id, self.owner, self.ttl)
        if token is None:
            self._remember_foreign(actor_id)
            return False
        self._foreign.pop(actor_id, None)
        self._used[actor_id] = time.monotonic()
        self._renewed[actor_id] = t0
        self.tokens[actor_id] = token
        self.store.set_fence(actor_id, token)
        self._wake.set()  # deliver what is queued for it
        kind: ChangeKind = "taken_over" if actor_id in self._taking_over else "acquired"
        self._changed(OwnershipChange(kind, actor_id, token))
        if self._tg is not None and self._replies is not None:
            self._tg.start_soon(self._announce_pending, actor_id, token)
        return True

    async def _announce_pending(self, actor_id: str, token: int) -> None:
        """After taking an actor (over): announce the replies of the messages already in
        its log and not yet handled, like those of inbox messages. Their askers may wait on
        other runtimes (the previous owner took them out of the inbox before it died)."""
        await anyio.lowlevel.checkpoint()  # the caller starts the cell right after claiming
        cell = self.system.loaded(actor_id)
        if cell is None:
            return
        await cell.ready.wait()
        if self.tokens.get(actor_id) != token or cell.done.is_set():
            return
        if cell.last_recovery is None or not cell.last_recovery.pending_messages:
            return  # nothing was waiting in its log
        try:
            pending = await self._logged_messages(actor_id, cell.handled_seq)
            for seq, message_id in pending:
                slot = await cell.reply_for(seq)
                if self._tg is not None:
                    self._tg.start_soon(self.announcer.when_done, actor_id, message_id, slot)
        except Exception:
            return  # the asks find their replies by polling

    async def _logged_messages(self, actor_id: str, after: int) -> list[tuple[int, str]]:
        """``(seq, message_id)`` of the actor's logged messages after seq ``after``."""
        rows = await self.system.store.read(actor_id, after_seq=after, kinds=(EntryKind.MESSAGE,))
        return [(r.seq, r.message_id) for r in rows if r.message_id is not None]

    def _remember_foreign(self, actor_id: str) -> None:
        """Another runtime holds the lease: do not ask again for a while (a third of the
        lease time, at most a second). If that runtime dies or lets the actor go meanwhile,
        what we queued in its inbox is unfinished work that the take-over scan places."""
        now = time.monotonic()
        if len(self._foreign) >= 10_000:
            self._foreign = {a: t for a, t in self._foreign.items() if t > now}
        self._foreign[actor_id] = now + min(self.ttl / 3, FOREIGN_RECHECK)

    def _lose(self, actor_id: str, why: str) -> None:
        token = self.tokens.pop(actor_id, None)
        self._used.pop(actor_id, None)
        self._renewed.pop(actor_id, None)
        self.lost.append(actor_id)
        self._changed(OwnershipChange("lost", actor_id, token, why))
        cell = self.system.loaded(actor_id)
        if cell is not None and not cell.done.is_set():
            err = LeaseLostError(actor_id, token, None)
            err.args = (f"{err.args[0]} ({why})",)
            cell.quarantine(err, status="stopped")
            cell.close()
        # The store keeps the old token as the fence: a step still running is rejected.

    async def _renew_loop(self) -> None:
        while True:
            await anyio.sleep(self.ttl / 3)
            await self._release_stopped()
            held = dict(self.tokens)
            if not held:
                self._last_renewed = time.monotonic()
                continue
            t0 = time.monotonic()
            try:
                renewed = await self.store.renew_leases(self.owner, held, self.ttl)
            except Exception as exc:
                if time.monotonic() - self._last_renewed > self.ttl * 0.8:
                    for actor_id in held:
                        self._lose(actor_id, f"lease renewal failing: {exc}")
                continue
            self._last_renewed = t0
            for actor_id in held:
                if self.tokens.get(actor_id) != held[actor_id]:
                    continue  # let go (or taken again) meanwhile
                if actor_id in renewed:
                    self._renewed[actor_id] = t0
                else:
                    self._lose(actor_id, "another runtime took the lease over")

    def check_lease(self, actor_id: str, token: int) -> None:
        """Raise ``LeaseLostError`` unless this runtime holds the actor's lease with ``token``
        and last confirmed it (the start of the acquire or renew statement that did, on the
        monotonic clock) less than ``lease_ttl - lease_ttl / 4`` ago: then at least a quarter
        of the lease is left, whatever happened since. Called before every tool starts."""
        current = self.tokens.get(actor_id)
        if current != token:
            raise LeaseLostError(actor_id, token, current)
        age = time.monotonic() - self._renewed.get(actor_id, float("-inf"))
        if age >= self.ttl * (1 - LEASE_MARGIN):
            err = LeaseLostError(actor_id, token, None)
            err.args = (
                f"lease of actor {actor_id!r} not confirmed for {age:.2f} s "
                f"(lease_ttl {self.ttl:g} s): it may have expired, so no tool is started "
                "and the actor stops here",
            )
            raise err

    async def release_passivated(self, actor_id: str, token: int) -> None:
        """The actor passivated here (its last snapshot is written): release its lease,
        unless a new cell took it again meanwhile (a message that came during passivation)."""
        cell = self.system.loaded(actor_id)
        if self.tokens.get(actor_id) != token or (cell is not None and not cell.done.is_set()):
            return
        del self.tokens[actor_id]
        self._used.pop(actor_id, None)
        self._renewed.pop(actor_id, None)
        try:
            await self.store.release_lease(actor_id, self.owner, token)
        except Exception:
            pass  # it expires
        self.passivated.append(actor_id)
        self._changed(OwnershipChange("released", actor_id, token, "passivated"))

    async def _release_stopped(self) -> None:
        """Let go of actors whose cell stopped here: after a rejected (fenced) append, a
        sequence conflict, a store failure or a lease that was no longer certain. Their
        leases are released (a no-op if another runtime holds them by now) instead of being
        renewed forever, so another runtime -- or this one, on next use -- takes them over
        and answers what waits in their inbox. A quarantined actor keeps its lease: its log
        needs an operator, and another runtime would only quarantine it too."""
        for actor_id in list(self.tokens):
            cell = self.system.loaded(actor_id)
            if cell is None or not cell.done.is_set() or cell.status != "stopped":
                continue
            token = self.tokens.pop(actor_id)
            self._renewed.pop(actor_id, None)
            self._used.pop(actor_id, None)
            if isinstance(cell.error, LeaseLostError):
                self.lost.append(actor_id)
                self._changed(OwnershipChange("lost", actor_id, token, str(cell.error)))
            else:
                why = f"stopped: {cell.error}"
                self._changed(OwnershipChange("released", actor_id, token, why))
            try:
                await self.store.release_lease(actor_id, self.owner, token)
            except Exception:
                pass  # it expires

    # -- observability ---------------------------------------------------------------------

    def _changed(self, change: OwnershipChange) -> None:
        self.feed.publish(change)

    def changes(self) -> AsyncIterator[OwnershipChange]:
        """Every ownership change from now on (see ``ActorSystem.ownership_changes``)."""
        return self.feed.subscribe()

    async def lease(self, actor_id: str) -> Lease | None:
        """The actor's lease as the store has it now, or None if it never had one (or the
        store cannot say: ``get_lease`` is optional for stores with leases)."""
        get_lease = getattr(self.store, "get_lease", None)
        if get_lease is None:
            return None
        got = await get_lease(actor_id)
        if got is None:
            return None
        return Lease(actor_id, got[0], got[1], got[2])

    # -- routing ---------------------------------------------------------------------------

    def _live(self, actor_id: str) -> Cell | None:
        cell = self.system.loaded(actor_id)
        if cell is not None and not cell.done.is_set() and actor_id in self.tokens:
            return cell
        return None

    async def route(self, cls: type[Actor[Any]], actor_id: str) -> bool:
        """True if the actor runs here (started here now if its lease was free)."""
        if self.client:
            return False
        if self._live(actor_id) is not None:
            self._used[actor_id] = time.monotonic()
            return True
        if self._foreign.get(actor_id, 0.0) > time.monotonic():
            return False  # owned elsewhere a moment ago: straight to the inbox
        await self.system.spawn(cls, actor_id)  # restarts a cell that lost its lease
        if self._live(actor_id) is None:
            return False
        self._used[actor_id] = time.monotonic()
        return True

    async def post_remote(
        self,
        cls: type[Actor[Any]],
        actor_id: str,
        letter: Letter,
        *,
        message_id: str | None,
        sender: str | None,
        want_reply: bool,
    ) -> Any:
        """Queue a message past the door for the actor's owner; with ``want_reply``, wait
        for its step.

        A ``message_id`` that already names another message, queued or logged, raises
        ``MessageIdReusedError`` (``_reuse``); nothing is queued."""
        registry = self.system.registry
        given_id = message_id is not None
        if message_id is None:
            message_id = _codec.new_message_id()
        elif not isinstance(message_id, str) or not message_id:
            raise ConfigurationError("message_id must be a non-empty str")
        body = letter.encoded()
        tag = letter.type_tag
        given = (tag, json.loads(body))  # as the owner will read it
        if self.client and actor_id not in self._registered:
            # A runtime places an actor it finds with inbox messages and no live lease; it
            # needs the actor's row (and class) for that. Idempotent.
            _codec.validate_actor_id(actor_id)
            await self.system.store.register_actor(actor_id, _codec.type_tag(cls))
            self._registered.add(actor_id)
        logged = None
        if given_id:  # the log is the authority on what the id names: checked first
            logged = await self.system.store.find_message(actor_id, message_id)
            if logged is not None:
                _codec.verify_row(logged, actor_id, logged.seq)
                _reuse.check_same_message(
                    registry,
                    actor_id,
                    message_id,
                    logged.seq,
                    _reuse.logged_message(logged),
                    given,
                )
                if not want_reply:
                    return None  # durable already: nothing to queue
        with self.remote.waiting(actor_id, message_id, given if given_id else None) as ask:
            if logged is None:
                queued = await self.store.inbox_put(actor_id, message_id, tag, body, sender)
                if queued is not None:  # a message is queued under this id already
                    was = (queued[0], json.loads(queued[1]))
                    _reuse.check_same_message(registry, actor_id, message_id, None, was, given)
            if not want_reply:
                return None
            return await self.remote.reply(ask, reply_type(cls), registry)

    # -- inbox -----------------------------------------------------------------------------

    async def _inbox_loop(self) -> None:
        while True:
            with anyio.move_on_after(self.poll_interval):
                await self._wake.wait()
            self._wake = anyio.Event()
            if not self.tokens:
                continue
            try:
                queued = await self.store.inbox_for(self.owner)
            except Exception:
                continue
            by_actor: dict[str, list[tuple[str, str, str, str | None]]] = {}
            for actor_id, message_id, tag, body, sender in queued:
                by_actor.setdefault(actor_id, []).append((message_id, tag, body, sender))
            async with anyio.create_task_group() as tg:
                for actor_id, items in by_actor.items():
                    tg.start_soon(self._drain, actor_id, items)

    async def _drain(self, actor_id: str, items: list[tuple[str, str, str, str | None]]) -> None:
        for message_id, tag, body, sender in items:
            if tag == _lifecycle.DELETE_TAG:
                await self._deleted(actor_id, message_id)
                return
            cell = self._live(actor_id)
            if cell is None:
                return
            self._used[actor_id] = time.monotonic()
            try:
                if tag in _lifecycle.COMMAND_TAGS:  # an operator's cancel/terminate
                    _lifecycle.command(cell, tag, body)
                    await self.store.inbox_delete(actor_id, message_id)
                    continue
                if tag == _rulings.RULING_TAG:  # an operator's ruling (ActorSystem.resolve)
                    await _rulings.command(self.system.store, actor_id, body)
                    await self.store.inbox_delete(actor_id, message_id)
                    continue
                plain = json.loads(body)
                if cell.ended is not None:  # answered from the log: ActorFinishedError
                    await _lifecycle.log_refused(cell, tag, plain, message_id, sender)
                    await self.store.inbox_delete(actor_id, message_id)
                    self.announcer.queue(actor_id, message_id)  # the refused step
                    continue
                registry = self.system.registry
                try:
                    letter = admit_message(registry, registry.decode_message(tag, plain))
                except ConfigurationError as exc:
                    # A type this runtime does not know (yet): logged as it came, its step
                    # fails with the decode error (as for a local message) and the inbox
                    # moves on instead of retrying it forever in front of the others.
                    letter = undecodable(tag, plain, exc)
                if self._replies is None:
                    await cell.post(letter, message_id=message_id, sender=sender, want_reply=False)
                    slot = None
                else:
                    # With a reply slot the step is flushed as soon as it completes (and the
                    # slot set only then), so its announcement never precedes its durability.
                    slot = await cell.post(
                        letter, message_id=message_id, sender=sender, want_reply=True
                    )
                    try:
                        await cell.journal.flush()  # the message, before it leaves the inbox
                    except SequenceConflictError as exc:
                        cell.quarantine(exc, status="stopped")
                        raise
                await self.store.inbox_delete(actor_id, message_id)
            except MessageIdReusedError:
                # the id names another message in the log: refused (its asker finds the
                # reuse when it reads the log) and out of the inbox, not retried forever
                with contextlib.suppress(Exception):
                    await self.store.inbox_delete(actor_id, message_id)
                continue
            except Exception:
                return  # stays queued: retried next round or by the next owner
            if slot is not None and self._tg is not None:
                self._tg.start_soon(self.announcer.when_done, actor_id, message_id, slot)

    async def _deleted(self, actor_id: str, message_id: str) -> None:
        """The actor was deleted (``delete_actor``'s inbox command): stop its cell here and
        release its lease, so nothing of the old actor answers or writes for the id again."""
        cell = self.system.loaded(actor_id)
        if cell is not None:
            cell.close()
            await cell.done.wait()
        token = self.tokens.pop(actor_id, None)
        self._used.pop(actor_id, None)
        self._renewed.pop(actor_id, None)
        try:
            await self.store.inbox_delete(actor_id, message_id)
            if token is not None:
                await self.store.release_lease(actor_id, self.owner, token)
        except Exception:
            pass  # the lease expires; the command is retried by whoever holds it next
        if token is not None:
            self._changed(OwnershipChange("released", actor_id, token, "deleted"))

    # -- take-over -------------------------------------------------------------------------

    async def recover(self) -> None:
        """Take over and recover actors with unfinished work and no live lease."""
        if self.client:
            return
        try:
            found = await self.store.orphans(owner=self.owner)
        except Exception:
            return
        for actor_id, actor_type in found:
            if self.max_actors is not None and len(self.tokens) >= self.max_actors:
                return
            cls = self.system.registry.actor_class(actor_type)
            if cls is None or self._live(actor_id) is not None:
                continue
            self._taking_over.add(actor_id)
            try:
                await self.route(cls, actor_id)
            except Exception:
                pass  # quarantined or owned meanwhile: status() tells
            finally:
                self._taking_over.discard(actor_id)

    async def _takeover_loop(self) -> None:
        while True:
            with anyio.move_on_after(self.ttl / 2):
                await self._scan_wake.wait()
            self._scan_wake = anyio.Event()
            await self.recover()
            await anyio.sleep(max(self.poll_interval, self.ttl / 10))  # at most this often
