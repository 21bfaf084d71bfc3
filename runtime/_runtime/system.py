"""``ActorSystem``: spawning, the one delivery path, placement, and recovery on start."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from contextlib import AsyncExitStack
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup

from .._core import recovery as _recovery, restart as _restart
from .._core.cell import Cell
from .._durability.events import not_here
from .._durability.lifecycle import Lifecycle
from .._durability.mailbox import Moved, Reply
from .._durability.rulings import KeyedLock
from .._durability.snapshots import SnapshotPolicy
from .._effects.actor import Actor
from .._effects.ref import ActorRef
from .._effects.registry import Registry
from .._journal import codec as _codec, door as _door, names as _names
from .._journal.errors import (
    ActorStoppedError,
    ConfigurationError,
)
from .._tracing import telemetry as _telemetry
from ..store import Store
from . import options as _options
from .host import Host
from .operate import Operations
from .options import SpawnOptions
from .passivation import Passivator
from .query import Queries
from .systimers import SystemTimers

if TYPE_CHECKING:  # leases (actorlog._cluster) are imported by a system that uses them
    from .._cluster.leases import OwnershipChange
    from .._cluster.ownership import Ownership
    from .._journal.leases import Lease

__all__ = ["ActorRef", "ActorSystem"]

A = TypeVar("A", bound=Actor[Any])
_MISSING: Any = object()


class ActorSystem(Lifecycle, SystemTimers, Queries, Operations):
    """Runs actors over one store.

    ::

        async with ActorSystem(SqliteStore("agents.db"), actors=[Researcher]) as system:
            ref = await system.spawn(Researcher, "run-42")

    On entry it opens the store and recovers every actor with unfinished work (pending
    messages or an interrupted step) whose class is in ``actors``; one whose class is not is
    quarantined until spawned with its class. On exit it lets running steps finish for up to
    ``shutdown_grace`` seconds, then cancels them (an interrupted tool call is then in doubt
    at the next start), closes the store, and flushes the application's OpenTelemetry
    span and metric processors, if it configured an SDK (``docs/tracing.md``).

    Args:
        store: a Store, or a URL string (``sqlite:///agents.db``).
        actors: the actor classes this system may run (and recover).
        messages: extra message classes to recognise in the log (those named in ``receive``
            annotations are found automatically).
        shutdown_grace: seconds to let in-flight steps finish on exit (a step waiting for
            an operator to resolve an in-doubt call is not waited for).
        owner: this runtime's name among several sharing one store (unique per process,
            e.g. ``f"{hostname}-{pid}"``). With a store that has ``capabilities.leases``
            (PostgreSQL), an actor then runs on one runtime at a time: it takes the actor's
            lease before recovering it, renews it, stops the actor if it loses it, sends to
            actors owned elsewhere through the store, and takes over the actors of runtimes
            that died. Ignored by other stores. See ``docs/scaling.md``.
        lease_ttl: seconds a lease lasts without renewal (renewed every third of it): how
            long a dead runtime's actors wait before another runtime takes them over.
        max_actors: bound the actors loaded in memory. With ``owner`` and leases: run at
            most this many here; others are left to (or reached on) other runtimes. Without
            leases: when more are loaded, the least recently used idle ones are passivated
            (snapshotted and dropped from memory; the next message recovers them).
        passivate_after: seconds an actor may stay idle before it is passivated (with
            ``owner`` and leases its lease is released too). Its next message recovers it,
            from the snapshot written when it passivated.
        poll_interval: with ``owner`` and leases, seconds between looks at this runtime's
            inbox in the store when no notification came (NOTIFY wakes it at once; the
            look is the fallback for a lost notification).
        reply_poll_interval: with ``owner`` and leases, seconds between looks for the reply
            of an ``ask`` sent to an actor on another runtime when no notification came
            (default ``4 x poll_interval``).
        client: run no actors here, only send to and ask actors run by the runtimes that
            share the store (a web server in front of them): no placement, no take-over,
            no leases; every ``send``/``ask`` goes through the store's inbox and is answered
            by the actor's owner. Needs a store with ``capabilities.leases`` (PostgreSQL);
            ``owner`` defaults to a unique name. See ``docs/scaling.md``.
    """

    def __init__(
        self,
        store: Store | str,
        *,
        actors: Iterable[type[Actor[Any]]] = (),
        messages: Iterable[type] = (),
        shutdown_grace: float = 5.0,
        recover_on_start: bool = True,
        owner: str | None = None,
        lease_ttl: float = 10.0,
        max_actors: int | None = None,
        passivate_after: float | None = None,
        poll_interval: float = 0.25,
        reply_poll_interval: float | None = None,
        client: bool = False,
    ) -> None:
        self.store: Store = _options.store_of(store)
        if owner is not None:
            _codec.validate_name(owner, "owner")
        #: the actor and message classes this system knows, by their log tags
        self.registry = Registry()
        for cls in _options.classes(actors, "actors", each=_names.check_actor_class):
            self.register(cls)
        for m in _options.classes(messages, "messages"):
            self.registry.learn(m)
        self.shutdown_grace = shutdown_grace
        self.recover_on_start = recover_on_start
        self._cells: dict[str, Cell] = {}
        #: snapshot options given to ``spawn`` per actor id: they hold for this system,
        #: through passivation and restarts of the actor, not only for the first cell
        self._options = SpawnOptions()
        self._quarantined: dict[str, BaseException] = {}
        self._tg: TaskGroup | None = None
        self._stack: AsyncExitStack | None = None
        self._closed = False
        #: one lock per actor id being spawned: spawns of different actors run (and commit
        #: their registrations) concurrently; two spawns of one id never start two cells
        self._spawn_locks = KeyedLock()
        _options.check_system(
            max_actors=max_actors,
            shutdown_grace=shutdown_grace,
            passivate_after=passivate_after,
            lease_ttl=lease_ttl,
            poll_interval=poll_interval,
            reply_poll_interval=reply_poll_interval,
        )
        self.max_actors = max_actors
        self.passivate_after = passivate_after
        # One passivation policy for both modes; with leases, max_actors bounds placement
        # (Ownership.claim) instead, and a passivated actor's lease is released (_forget).
        leases = owner is not None and self.store.capabilities.leases
        self._passivator = Passivator(
            self._cells.values,
            lambda: self.active_actors,
            passivate_after=passivate_after,
            max_actors=None if leases else max_actors,
        )
        self._ownership: Ownership | None = None
        self._host = Host(
            store=self.store,
            registry=self.registry,
            cells=self._cells,
            options=self._options,
            closing=lambda: self._closed,
            forget=self._forget,
            spawn_task=self._spawn_task,
            deliver=self._deliver,
            spawn=self.spawn,
            ref=self.ref,
        )
        if client:
            if not self.store.capabilities.leases:
                raise ConfigurationError(
                    "client=True needs a store shared by runtimes with leases (PostgreSQL): "
                    "with this store there is no owner to deliver to; drop client=True to "
                    "run the actors here"
                )
            import uuid

            owner = owner or f"client-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        if owner is not None and self.store.capabilities.leases:
            from .._cluster.ownership import Ownership

            self._ownership = Ownership(
                self._host,
                owner,
                lease_ttl,
                max_actors=max_actors,
                poll_interval=poll_interval,
                reply_poll_interval=reply_poll_interval,
                client=client,
            )
            self._host.ownership = self._ownership
        self._init_timers(owner, shared=self._ownership is not None)

    # -- registration ----------------------------------------------------------------------

    def register(self, cls: type[Actor[Any]]) -> None:
        """Allow this system to run (and recover) actors of ``cls``."""
        self.registry.register(cls)

    # -- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> ActorSystem:
        if self._closed:
            raise ActorStoppedError("this ActorSystem was closed; create a new one")
        _telemetry.instruments()  # the metric instruments, if the application loaded OTel
        stack = AsyncExitStack()
        await stack.__aenter__()
        try:
            await self.store.open()
            stack.push_async_callback(self.store.close)
            if self._ownership is not None:
                stack.push_async_callback(self._ownership.stop)  # after the last flush
            stack.push_async_callback(self._flush_all)
            self._tg = await stack.enter_async_context(anyio.create_task_group())
            if self._ownership is not None:
                await self._ownership.start(self._tg)
            if self._passivator.needed and not (self._ownership and self._ownership.client):
                self._tg.start_soon(self._passivator.run, name="actorlog:passivator")
            self._start_timers(self._tg, bool(self._ownership and self._ownership.client))
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        if self.recover_on_start:
            try:
                await self._recover_all()
            except BaseException:
                await self.__aexit__(None, None, None)
                raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._stack is None:
            return
        self._closed = True
        cells = list(self._cells.values())
        for cell in cells:
            cell.close()
        with anyio.move_on_after(self.shutdown_grace, shield=True):
            for cell in cells:
                # A step waiting for an operator's decision on an in-doubt call cannot end
                # by itself: do not spend the grace on it. Its intent is logged, so it is in
                # doubt again at the next start.
                while not cell.done.is_set() and not cell.in_doubt and not cell.sleeping:
                    with anyio.move_on_after(0.02):
                        await cell.done.wait()
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
        stack, self._stack = self._stack, None
        try:
            await stack.aclose()
        finally:
            for cell in self._cells.values():
                cell.dispose()  # cells cancelled before their task ever ran
            # the application's batching span processor may hold this system's last spans,
            # and a server (uvicorn) can end the process without running atexit hooks
            await _telemetry.flush()
        # If the caller's scope was cancelled meanwhile (a fail_after around the system), on
        # asyncio the task group's exit can absorb that cancellation: deliver it, so the
        # caller's fail_after raises TimeoutError instead of returning as if all had ended.
        await anyio.lowlevel.checkpoint_if_cancelled()

    async def _flush_all(self) -> None:
        """Make buffered entries of steps that finished before the cancel durable."""
        with anyio.CancelScope(shield=True):
            for cell in list(self._cells.values()):
                try:
                    if cell.journal.broken is None:
                        await cell.journal.flush()
                except Exception:
                    pass

    async def _recover_all(self) -> None:
        if self._ownership is not None:
            await self._ownership.recover()  # only actors whose lease is free
            return
        starts, quarantined = await _recovery.unfinished(self.store, self.registry)
        self._quarantined.update(quarantined)
        for cls, actor_id in starts:
            self._start_cell(cls, actor_id, self._options.policy_for(cls, actor_id))

    def _spawn_task(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        if self._tg is not None and not self._closed:
            self._tg.start_soon(fn, *args)

    def _check_open(self) -> TaskGroup:
        if self._tg is None or self._closed:
            raise ActorStoppedError(
                "the ActorSystem is not running: use it inside 'async with ActorSystem(...)'"
            )
        return self._tg

    # -- actors ----------------------------------------------------------------------------

    def _start_cell(
        self, cls: type[Actor[Any]], actor_id: str, policy: SnapshotPolicy, new: bool = False
    ) -> Cell:
        tg = self._check_open()
        cell = Cell(self._host, cls, actor_id, policy)
        # registered just now, by this runtime alone (without leases another runtime could
        # claim and write it before this one does): nothing to recover (_recovery.start_new)
        cell.new = new and self._ownership is None
        self._cells[actor_id] = cell
        self._quarantined.pop(actor_id, None)
        tg.start_soon(cell.run, name=f"actorlog:{actor_id}")
        self._passivator.over_limit()
        return cell

    async def spawn(
        self,
        cls: type[A],
        actor_id: str,
        *,
        snapshot_every: int | None = _MISSING,
        snapshot_every_seconds: float | None = _MISSING,
        snapshot_keep: int = _MISSING,
        recovery_budget: float | None = _MISSING,
        retention: str | float | timedelta = _MISSING,
    ) -> ActorRef[A]:
        """Start (or resume) the actor ``actor_id`` of class ``cls``.

        An id that already exists resumes from its log; recovery has rebuilt its state when
        this returns (its interrupted step and pending messages continue in the background).

        The snapshot options override the class attributes for this actor, for good: they
        are saved in the store (an ``options`` event in the actor's history) before this
        returns, and hold through passivation, restarts and new processes until a later
        ``spawn`` changes them (options not given keep their saved values). An actor already
        running takes them at once. A store error while saving them does not fail the spawn
        (they only tune snapshots): a warning is logged. See ``docs/tuning.md``. ``retention``
        (like the class attribute) is what compaction may remove (docs/recovery.md).

        Raises:
            ConfigurationError: bad id or options, or the id exists with another class.
            ActorQuarantinedError: the actor's log is damaged (``__cause__`` says how).
        """
        self._check_open()
        _codec.validate_actor_id(actor_id)
        _names.check_actor_class(cls)
        values = (snapshot_every, snapshot_every_seconds, snapshot_keep, recovery_budget, retention)
        options = _options.given(values, _MISSING)
        merged = {**self._options.given.get(actor_id, {}), **options}
        policy = _options.policy(cls, merged)
        self.register(cls)
        cell = await self._spawn_cell(cls, actor_id, policy)
        if cell is not None:
            try:
                if options:
                    # over those saved by an earlier spawn (read by the cell's recovery)
                    merged = {**(cell.saved_options or {}), **merged}
                    cell.policy = policy = _options.policy(cls, merged)
                    self._options.given[actor_id] = merged
                    # saved before spawn returns: a later process (or a recovery after
                    # passivation) starts the actor with these options
                    if merged != cell.saved_options and await self._options.save(
                        self.store, actor_id, merged
                    ):
                        cell.saved_options = merged
            finally:
                cell.holds -= 1
        return ActorRef(self, cls, actor_id)

    async def _spawn_cell(
        self, cls: type[Actor[Any]], actor_id: str, policy: SnapshotPolicy
    ) -> Cell | None:
        """Start (or find) the actor's cell and wait until it is ready; None if another
        runtime owns it. The cell is returned with a hold taken (``cell.holds``), from the
        moment it exists: it cannot passivate before the caller has used it. The caller
        releases the hold."""
        tag = _codec.type_tag(cls)
        cell = self._cells.get(actor_id)
        if cell is not None and cell.passivating:
            await cell.done.wait()
        async with self._spawn_locks.hold(actor_id):
            cell = self._cells.get(actor_id)
            if cell is None or _restart.restartable(cell):
                # a state the codec cannot encode fails here, not at a quiet first snapshot
                _codec.to_plain(cls().initial_state(), "initial state")
                row = await self.store.register_actor(actor_id, tag)
                if not _names.answers_to(cls, row.actor_type):  # its tag or an alias
                    raise ConfigurationError(_names.class_mismatch(actor_id, row.actor_type, cls))
                if self._ownership is not None and not await self._ownership.claim(actor_id):
                    return None  # owned by another runtime
                cell = self._start_cell(cls, actor_id, policy, row.created)
            elif cell.cls is not cls:
                raise ConfigurationError(
                    f"actor {actor_id!r} is running as {cell.actor_type}, not {tag}"
                )
            cell.holds += 1
        try:
            await cell.ready.wait()
            cell.check_usable()
        except BaseException:
            cell.holds -= 1
            raise
        return cell

    def ref(self, cls: type[A], actor_id: str) -> ActorRef[A]:
        """A reference without I/O; the actor is started on first use."""
        _codec.validate_actor_id(actor_id)
        self.register(cls)
        return ActorRef(self, cls, actor_id)

    async def _cell(self, cls: type[Actor[Any]], actor_id: str) -> Cell:
        """The actor's live cell, started if needed, returned with a hold taken (the caller
        releases it): a cell started for a post is not passivated before that post."""
        for _ in range(100):  # each round waits for a passivation to finish: bounded
            self._check_open()
            cell = self._cells.get(actor_id)
            if cell is not None and cell.passivating:
                await cell.done.wait()  # writing its last snapshot; then start it again
                continue
            if cell is None or _restart.restartable(cell):
                started = await self._spawn_cell(
                    cls, actor_id, self._options.policy_for(cls, actor_id)
                )
                if started is None:
                    continue
                if started.passivating or started.done.is_set():
                    started.holds -= 1
                    continue
                return started
            cell.holds += 1
            return cell
        raise ActorStoppedError(f"actor {actor_id!r} could not be started here")

    async def _deliver(
        self,
        cls: type[Actor[Any]],
        actor_id: str,
        letter: _door.Letter,
        *,
        message_id: str | None,
        sender: str | None,
        want_reply: bool,
        timeout: float | None = None,
    ) -> Any:
        """The one delivery path (``ref.send``/``ask``, ``ctx.send``, timers) of a message past
        the door (``_door.admit_message``): to the actor's cell here, or (leases: another
        runtime owns it) through the store's inbox. With ``want_reply``, waits for the reply,
        at most ``timeout`` seconds (routing and logging included)."""
        if timeout is None and self._ownership is None:  # _route_and_post's local path
            slot = await self._post_local(
                cls, actor_id, letter, message_id=message_id, sender=sender, want_reply=want_reply
            )
            return None if slot is None else await slot.wait()
        if timeout is None:
            return await self._route_and_post(cls, actor_id, letter, message_id, sender, want_reply)
        with anyio.fail_after(timeout):
            return await self._route_and_post(cls, actor_id, letter, message_id, sender, want_reply)

    async def _route_and_post(
        self,
        cls: type[Actor[Any]],
        actor_id: str,
        letter: _door.Letter,
        message_id: str | None,
        sender: str | None,
        want_reply: bool,
    ) -> Any:
        own = self._ownership
        if own is not None and not await own.route(cls, actor_id):
            return await own.post_remote(
                cls, actor_id, letter, message_id=message_id, sender=sender, want_reply=want_reply
            )
        slot = await self._post_local(
            cls, actor_id, letter, message_id=message_id, sender=sender, want_reply=want_reply
        )
        return None if slot is None else await slot.wait()

    async def _stream(self, cls: Any, actor_id: str, letter: _door.Letter, mid: str | None) -> Any:
        """``ask_stream``'s delivery: here only (events do not travel between processes)."""
        if self._ownership is not None and not await self._ownership.route(cls, actor_id):
            raise not_here(actor_id)  # before anything is written
        return await self._post_local(cls, actor_id, letter, message_id=mid, want_reply=True)

    async def _post_local(
        self,
        cls: type[Actor[Any]],
        actor_id: str,
        letter: _door.Letter,
        *,
        message_id: str | None,
        sender: str | None = None,
        want_reply: bool,
    ) -> Reply | None:
        """Post to the actor's cell here, starting (or restarting) it as needed."""
        while True:
            cell = self._cells.get(actor_id)
            # ``_cell``'s usual answer, inline: a running cell, held for this post
            if cell is not None and not (
                cell.passivating or cell.is_done or self._closed or self._tg is None
            ):
                cell.holds += 1
            else:
                cell = await self._cell(cls, actor_id)
            try:
                return await cell.post(
                    letter, message_id=message_id, sender=sender, want_reply=want_reply
                )
            except Moved:
                continue  # it passivated before we held it: the next cell is held from birth
            finally:
                cell.holds -= 1
                cell.last_active = time.monotonic()

    @property
    def active_actors(self) -> int:
        """How many actors are loaded in memory here (passivated ones are not)."""
        return sum(1 for c in self._cells.values() if not c.done.is_set())

    def _forget(self, cell: Cell) -> None:
        """Drop a passivated cell so its memory is freed (its log and snapshot keep it);
        with leases, let go of its lease too (unless a new cell has taken it meanwhile)."""
        if self._cells.get(cell.actor_id) is cell:
            del self._cells[cell.actor_id]
        if self._ownership is not None:
            self._spawn_task(self._ownership.release_passivated, cell.actor_id, cell.fencing_token)

    def status(self, actor_id: str) -> str:
        """``starting``, ``running``, ``idle``, ``in_doubt``, ``finished``, ``terminated``,
        ``quarantined``, ``stopped``, or ``unknown`` (not loaded in this system)."""
        _codec.validate_actor_id(actor_id)  # a typed error for a malformed id
        cell = self._cells.get(actor_id)
        if cell is not None:
            return cell.status
        if actor_id in self._quarantined:
            return "quarantined"
        return "unknown"

    async def ownership(self, actor_id: str) -> Lease | None:
        """Who owns the actor now, with which fencing token, and for how long: its lease as
        the store has it (owner None or ``expires_in <= 0``: free). None if the actor never
        had a lease, or this system does not use leases (no ``owner=``/``client=True``, or a
        store without ``capabilities.leases``)."""
        _codec.validate_actor_id(actor_id)
        if self._ownership is None:
            return None
        return await self._ownership.lease(actor_id)

    def ownership_changes(self) -> AsyncIterator[OwnershipChange]:
        """An async iterator of this runtime's ownership changes from now on: actors
        ``acquired``, ``taken_over``, ``lost`` or ``released`` here. It ends when the system
        closes. A subscriber that falls 1000 changes behind misses the ones after.

        Raises:
            ConfigurationError: this system does not use leases.
        """
        if self._ownership is None:
            raise ConfigurationError(
                "ownership_changes() needs leases: ActorSystem(store, owner=...) over a store "
                "with capabilities.leases (PostgreSQL)"
            )
        return self._ownership.changes()
