"""``ActorSystem`` and ``ActorRef``: spawning, messaging and recovery on start."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any, Generic, TypeVar

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup

from . import _codec, _decisions, _names
from ._actor import Actor, accepted_messages
from ._cell import Cell, Moved, Reply
from ._errors import (
    ActorlogError,
    ActorNotFoundError,
    ActorQuarantinedError,
    ActorStoppedError,
    ConfigurationError,
    CorruptEntryError,
    LeaseLostError,
    StoreUnavailableError,
)
from ._ownership import Lease, Ownership, OwnershipChange
from ._snapshots import RecoveryCost, SnapshotPolicy
from .store import Store

__all__ = ["ActorRef", "ActorSystem"]

logger = logging.getLogger("actorlog")

A = TypeVar("A", bound=Actor[Any])
_MISSING: Any = object()


class ActorRef(Generic[A]):
    """A handle on an actor by its stable id. Cheap to create; holds no resources."""

    __slots__ = ("actor_id", "cls", "system")

    def __init__(self, system: ActorSystem, cls: type[A], actor_id: str) -> None:
        self.system = system
        self.cls = cls
        self.actor_id = actor_id

    async def send(self, msg: Any, *, message_id: str | None = None) -> None:
        """Deliver ``msg``; returns once it is durable in the actor's log.

        With a ``message_id`` already used for this actor, nothing is written (exactly once).
        A cancellation point: if cancelled, the message may or may not have been logged;
        send again with the same ``message_id`` to be sure.

        Raises:
            ConfigurationError: ``message_id`` is not a non-empty str that UTF-8 can encode
                (no lone surrogates), or is too long; nothing was written.
        """
        _codec.validate_message_id(message_id)
        own = self.system._ownership
        if own is not None and not await own.route(self.cls, self.actor_id):
            await own.post_remote(
                self.cls, self.actor_id, msg, message_id=message_id, sender=None, want_reply=False
            )
            return
        await self.system._post_local(
            self.cls, self.actor_id, msg, message_id=message_id, sender=None, want_reply=False
        )

    async def ask(
        self, msg: Any, *, message_id: str | None = None, timeout: float | None = None
    ) -> Any:
        """Deliver ``msg`` and wait for the handler's reply.

        With ``message_id``, asking again (after any crash) returns the recorded reply, or
        re-raises the recorded ``HandlerError``, without running the step again.

        Raises:
            ConfigurationError: a bad ``message_id`` (see ``send``); nothing was written.
            HandlerError: the handler raised (carries the original type and message).
            ActorQuarantinedError: the actor's log is damaged or it hit non-determinism.
            StoreUnavailableError: the store failed (disk full, I/O error, the database went
                away): possibly transient. The actor stopped; the next call starts it again
                from its log, and asking again with the same ``message_id`` is safe.
            TimeoutError: no reply within ``timeout`` (the message stays logged and will be
                handled; ask again with the same ``message_id`` to get the reply).
        """
        _codec.validate_message_id(message_id)
        own = self.system._ownership
        if own is not None and not await own.route(self.cls, self.actor_id):
            return await own.post_remote(
                self.cls,
                self.actor_id,
                msg,
                message_id=message_id,
                sender=None,
                want_reply=True,
                timeout=timeout,
            )
        post = self.system._post_local
        if timeout is None:
            slot = await post(
                self.cls, self.actor_id, msg, message_id=message_id, sender=None, want_reply=True
            )
            assert slot is not None
            return await slot.wait()
        with anyio.fail_after(timeout):
            slot = await post(
                self.cls, self.actor_id, msg, message_id=message_id, sender=None, want_reply=True
            )
            assert slot is not None
            return await slot.wait()

    @property
    def status(self) -> str:
        return self.system.status(self.actor_id)

    def __repr__(self) -> str:
        return f"<ActorRef {self.cls.__qualname__} {self.actor_id!r}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ActorRef) and other.actor_id == self.actor_id

    def __hash__(self) -> int:
        return hash(self.actor_id)


class _IdLock:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = anyio.Lock()
        self.users = 0


class ActorSystem:
    """Runs actors over one store.

    ::

        async with ActorSystem(SqliteStore("agents.db"), actors=[Researcher]) as system:
            ref = await system.spawn(Researcher, "run-42")

    On entry it opens the store and recovers every actor with unfinished work (pending
    messages or an interrupted step) whose class is in ``actors``; one whose class is not is
    quarantined until spawned with its class. On exit it lets running steps finish for up to
    ``shutdown_grace`` seconds, then cancels them (an interrupted tool call is then in doubt
    at the next start) and closes the store.

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
        if isinstance(store, str):
            from actorlog.stores import open_store

            self.store: Store = open_store(store)
        else:
            self.store = store
        self._classes: dict[str, type[Actor[Any]]] = {}
        self._messages: dict[str, type] = {}
        for cls in actors:
            self.register(cls)
        for m in messages:
            self._learn_message_type(m)
        self.shutdown_grace = shutdown_grace
        self.recover_on_start = recover_on_start
        self._cells: dict[str, Cell] = {}
        #: snapshot options given to ``spawn`` per actor id: they hold for this system,
        #: through passivation and restarts of the actor, not only for the first cell
        self._spawn_options: dict[str, dict[str, Any]] = {}
        self._costs: dict[str, RecoveryCost] = {}
        self._quarantined: dict[str, BaseException] = {}
        self._tg: TaskGroup | None = None
        self._stack: AsyncExitStack | None = None
        self._closed = False
        #: one lock per actor id being spawned: spawns of different actors run (and commit
        #: their registrations) concurrently; two spawns of one id never start two cells
        self._spawn_locks: dict[str, _IdLock] = {}
        if max_actors is not None and (
            not isinstance(max_actors, int) or isinstance(max_actors, bool) or max_actors < 1
        ):
            raise ConfigurationError(f"max_actors must be a positive int, not {max_actors!r}")
        for name, seconds in (
            ("passivate_after", 1.0 if passivate_after is None else passivate_after),
            ("lease_ttl", lease_ttl),
            ("poll_interval", poll_interval),
            ("reply_poll_interval", 1.0 if reply_poll_interval is None else reply_poll_interval),
        ):
            if isinstance(seconds, bool) or not (
                isinstance(seconds, (int, float)) and 0 < seconds < float("inf")
            ):
                raise ConfigurationError(
                    f"{name} must be a positive number of seconds, not {seconds!r}"
                )
        if isinstance(shutdown_grace, bool) or not (
            isinstance(shutdown_grace, (int, float)) and 0 <= shutdown_grace < float("inf")
        ):
            raise ConfigurationError(
                f"shutdown_grace must be a number of seconds >= 0, not {shutdown_grace!r}"
            )
        self.max_actors = max_actors
        self.passivate_after = passivate_after
        self._over_limit: anyio.Event | None = None  # wakes the passivator (made by it)
        self._ownership: Ownership | None = None
        if client:
            if not self.store.capabilities.leases:
                raise ConfigurationError(
                    "client=True needs a store shared by runtimes with leases (PostgreSQL): "
                    "with this store there is no owner to deliver to; drop client=True to "
                    "run the actors here"
                )
            owner = owner or _client_name()
        if owner is not None and self.store.capabilities.leases:
            self._ownership = Ownership(
                self,
                owner,
                lease_ttl,
                max_actors=max_actors,
                passivate_after=passivate_after,
                poll_interval=poll_interval,
                reply_poll_interval=reply_poll_interval,
                client=client,
            )

    # -- registration ----------------------------------------------------------------------

    def register(self, cls: type[Actor[Any]]) -> None:
        """Allow this system to run (and recover) actors of ``cls``."""
        if not (isinstance(cls, type) and issubclass(cls, Actor)):
            raise ConfigurationError(_names.not_an_actor(cls))
        _names.learn(self._classes, cls, replace=True)  # its name and aliases
        for m in accepted_messages(cls) or ():
            self._learn_message_type(m)

    def _learn_message_type(self, cls: type) -> None:
        _names.learn(self._messages, cls)  # its name and aliases

    def _decode_message(self, tag: str, body: Any) -> Any:
        cls = self._messages.get(tag)
        if cls is None:
            cls = _names.find_class(tag)  # a declared name, or module.QualName
            if cls is not None:
                self._messages[tag] = cls
        if cls is None:
            raise ConfigurationError(_names.unknown_message(tag))
        try:
            return _codec.converter.structure(body, cls)
        except Exception as exc:
            raise ConfigurationError(f"cannot decode message of type {tag!r}: {exc}") from exc

    # -- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> ActorSystem:
        if self._closed:
            raise ActorStoppedError("this ActorSystem was closed; create a new one")
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
            elif self.passivate_after is not None or self.max_actors is not None:
                self._tg.start_soon(self._passivator, name="actorlog:passivator")
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
                while not cell.done.is_set() and not cell.in_doubt:
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
        for row in await self.store.list_actors():
            if row.damage is not None:
                # its summary row cannot be read, so whether it has unfinished work is
                # unknown: quarantined with the damage named (spawning it raises the same)
                self._quarantined[row.actor_id] = CorruptEntryError(
                    row.actor_id, 0, "column type", row.damage
                )
                continue
            if row.handled_seq >= row.last_message_seq:
                continue
            cls = self._classes.get(row.actor_type)
            if cls is None:
                err = ActorNotFoundError(
                    f"actor {row.actor_id!r} has unfinished work but its class "
                    f"{row.actor_type!r} is not registered with this system; spawn it with "
                    "its class (or add it to actors=[...]) to recover it"
                )
                self._quarantined[row.actor_id] = err
                try:
                    await self.store.record_event(
                        row.actor_id,
                        "quarantined",
                        f'{{"error": "class {row.actor_type} not registered"}}',
                    )
                except Exception:
                    pass
                continue
            self._start_cell(cls, row.actor_id, self._actor_policy(cls, row.actor_id))

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

    @staticmethod
    def _policy(cls: type[Actor[Any]], options: dict[str, Any]) -> SnapshotPolicy:
        unknown = set(options) - {
            "snapshot_every",
            "snapshot_every_seconds",
            "snapshot_keep",
            "recovery_budget",
        }
        if unknown:
            raise ConfigurationError(f"unknown spawn options: {', '.join(sorted(unknown))}")
        return SnapshotPolicy(
            every=options.get("snapshot_every", cls.snapshot_every),
            every_seconds=options.get("snapshot_every_seconds", cls.snapshot_every_seconds),
            keep=options.get("snapshot_keep", cls.snapshot_keep),
            recovery_budget=options.get("recovery_budget", cls.recovery_budget),
        )

    def _actor_policy(self, cls: type[Actor[Any]], actor_id: str) -> SnapshotPolicy:
        """The policy of an actor started without options: those its last ``spawn`` in this
        system gave, else its class attributes."""
        return self._policy(cls, self._spawn_options.get(actor_id, {}))

    def _recovery_cost(self, actor_type: str) -> RecoveryCost:
        """The recovery-cost model shared by the actors of one class in this system."""
        cost = self._costs.get(actor_type)
        if cost is None:
            cost = self._costs[actor_type] = RecoveryCost()
        return cost

    def _start_cell(self, cls: type[Actor[Any]], actor_id: str, policy: SnapshotPolicy) -> Cell:
        tg = self._check_open()
        cell = Cell(self, cls, actor_id, policy)
        self._cells[actor_id] = cell
        self._quarantined.pop(actor_id, None)
        tg.start_soon(cell.run, name=f"actorlog:{actor_id}")
        if (
            self._over_limit is not None
            and self.max_actors is not None
            and len(self._cells) > self.max_actors
        ):
            self._over_limit.set()
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
    ) -> ActorRef[A]:
        """Start (or resume) the actor ``actor_id`` of class ``cls``.

        An id that already exists resumes from its log; recovery has rebuilt its state when
        this returns (its interrupted step and pending messages continue in the background).

        The snapshot options override the class attributes for this actor, for good: they
        are saved in the store (an ``options`` event in the actor's history) before this
        returns, and hold through passivation, restarts and new processes until a later
        ``spawn`` changes them (options not given keep their saved values). An actor already
        running takes them at once. A store error while saving them does not fail the spawn
        (they only tune snapshots): a warning is logged. See ``docs/tuning.md``.

        Raises:
            ConfigurationError: bad id or options, or the id exists with another class.
            ActorQuarantinedError: the actor's log is damaged (``__cause__`` says how).
        """
        self._check_open()
        _codec.validate_actor_id(actor_id)
        options = {
            k: v
            for k, v in (
                ("snapshot_every", snapshot_every),
                ("snapshot_every_seconds", snapshot_every_seconds),
                ("snapshot_keep", snapshot_keep),
                ("recovery_budget", recovery_budget),
            )
            if v is not _MISSING
        }
        merged = {**self._spawn_options.get(actor_id, {}), **options}
        policy = self._policy(cls, merged)
        self.register(cls)
        cell = await self._spawn_cell(cls, actor_id, policy)
        if cell is not None:
            try:
                if options:
                    # over those saved by an earlier spawn (read by the cell's recovery)
                    merged = {**(cell.saved_options or {}), **merged}
                    cell.policy = policy = self._policy(cls, merged)
                    self._spawn_options[actor_id] = merged
                    if merged != cell.saved_options:
                        # saved before spawn returns: a later process (or a recovery after
                        # passivation) starts the actor with these options
                        await self._save_options(cell, merged)
            finally:
                cell.holds -= 1
        return ActorRef(self, cls, actor_id)

    async def _save_options(self, cell: Cell, options: dict[str, Any]) -> None:
        """Save spawn options with the actor. They only tune snapshots (never correctness),
        so a store failure here does not fail the spawn: the options hold in this system, a
        warning is logged, and the next ``spawn`` with options saves them again."""
        try:
            await self.store.record_event(
                cell.actor_id, "options", json.dumps(options, sort_keys=True)
            )
        except ActorlogError as exc:
            logger.warning(
                "actor %r: spawn options %s hold in this system but could not be saved: %s",
                cell.actor_id,
                options,
                exc,
            )
            return
        cell.saved_options = options

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
        async with self._spawn_lock(actor_id):
            cell = self._cells.get(actor_id)
            if cell is None or _restartable(cell):
                # A state type the codec cannot encode fails here, before anything is written
                # (not at the first snapshot, which would fail quietly).
                _codec.to_plain(cls().initial_state(), "initial state")
                row = await self.store.register_actor(actor_id, tag)
                if not _names.answers_to(cls, row.actor_type):  # its tag or an alias
                    raise ConfigurationError(_names.class_mismatch(actor_id, row.actor_type, cls))
                if self._ownership is not None and not await self._ownership.claim(actor_id):
                    return None  # owned by another runtime
                cell = self._start_cell(cls, actor_id, policy)
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

    @contextlib.asynccontextmanager
    async def _spawn_lock(self, actor_id: str) -> AsyncIterator[None]:
        entry = self._spawn_locks.get(actor_id)
        if entry is None:
            entry = self._spawn_locks[actor_id] = _IdLock()
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if not entry.users:
                del self._spawn_locks[actor_id]

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
            if cell is None or _restartable(cell):
                started = await self._spawn_cell(cls, actor_id, self._actor_policy(cls, actor_id))
                if started is None:
                    continue
                if started.passivating or started.done.is_set():
                    started.holds -= 1
                    continue
                return started
            cell.holds += 1
            return cell
        raise ActorStoppedError(f"actor {actor_id!r} could not be started here")

    async def _deliver(self, ref: ActorRef[Any], msg: Any, *, message_id: str, sender: str) -> None:
        own = self._ownership
        if own is not None and not await own.route(ref.cls, ref.actor_id):
            await own.post_remote(
                ref.cls, ref.actor_id, msg, message_id=message_id, sender=sender, want_reply=False
            )
            return
        await self._post_local(
            ref.cls, ref.actor_id, msg, message_id=message_id, sender=sender, want_reply=False
        )

    async def _post_local(
        self,
        cls: type[Actor[Any]],
        actor_id: str,
        msg: Any,
        *,
        message_id: str | None,
        sender: str | None,
        want_reply: bool,
    ) -> Reply | None:
        """Post to the actor's cell here, starting (or restarting) it as needed."""
        while True:
            cell = await self._cell(cls, actor_id)
            try:
                return await cell.post(
                    msg, message_id=message_id, sender=sender, want_reply=want_reply
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
        """Drop a passivated cell so its memory is freed (its log and snapshot keep it)."""
        if self._cells.get(cell.actor_id) is cell:
            del self._cells[cell.actor_id]

    async def _passivator(self) -> None:
        """Without leases: passivate actors idle for ``passivate_after`` seconds, and the
        least recently used idle ones while more than ``max_actors`` are loaded."""
        period = 0.25 if self.passivate_after is None else min(0.25, self.passivate_after / 2)
        while True:
            self._over_limit = wake = anyio.Event()
            with anyio.move_on_after(period):
                await wake.wait()  # a start above max_actors: look at once
            now = time.monotonic()
            idle = sorted(
                (c for c in self._cells.values() if c.is_idle()), key=lambda c: c.last_active
            )
            chosen = [
                c
                for c in idle
                if self.passivate_after is not None and now - c.last_active >= self.passivate_after
            ]
            if self.max_actors is not None:
                excess = self.active_actors - self.max_actors
                for c in idle:
                    if len(chosen) >= excess:
                        break
                    if c not in chosen:
                        chosen.append(c)
            for c in chosen:
                c.passivate()

    def status(self, actor_id: str) -> str:
        """``starting``, ``running``, ``idle``, ``in_doubt``, ``quarantined``, ``stopped``,
        or ``unknown`` (not loaded in this system)."""
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

    def error(self, actor_id: str) -> BaseException | None:
        """Why an actor is quarantined or stopped (None if it is not)."""
        cell = self._cells.get(actor_id)
        if cell is not None:
            return cell.error
        return self._quarantined.get(actor_id)

    def last_recovery(self, actor_id: str) -> dict[str, Any] | None:
        """What the last recovery of this actor did (snapshot used, snapshots rejected,
        entries read, steps replayed, pending messages, in-doubt intents, duration), or None
        if it is not loaded."""
        cell = self._cells.get(actor_id)
        return None if cell is None or cell.last_recovery is None else dict(cell.last_recovery)

    def in_doubt(self, actor_id: str) -> dict[int, tuple[str, str]]:
        """The actor's intents waiting for an operator: ``{intent_seq: (tool, key)}``."""
        cell = self._cells.get(actor_id)
        if cell is None:
            return {}
        return {seq: (w.tool, w.key) for seq, w in cell.in_doubt.items()}

    async def wait_in_doubt(
        self, actor_id: str, *, poll: float = 0.01
    ) -> dict[int, tuple[str, str]]:
        """Wait until the actor has at least one in-doubt intent; return them."""
        while True:
            found = self.in_doubt(actor_id)
            if found:
                return found
            cell = self._cells.get(actor_id)
            if cell is not None and cell.error is not None:
                raise ActorQuarantinedError(actor_id, cell.error) from cell.error
            await anyio.sleep(poll)

    async def resolve(
        self,
        actor_id: str,
        intent_seq: int,
        *,
        result: Any = _decisions.MISSING,
        retry: bool = False,
        fail: str | None = None,
        by: str | None = None,
        reason: str = "",
    ) -> None:
        """Settle an in-doubt tool call; the decision is recorded in the log.

        Exactly one of ``result=`` (the call happened and returned this), ``retry=True``
        (run it again, once) or ``fail="why"`` (the call did not happen; ``ctx.call`` raises
        ``ToolCallError`` in the handler).
        """
        decision = _decisions.operator_decision(
            result=result, retry=retry, fail=fail, by=by, reason=reason
        )
        cell = self._cells.get(actor_id)
        if cell is None:
            raise ActorNotFoundError(f"actor {actor_id!r} is not running in this system")
        await cell.resolve(
            intent_seq,
            action=decision["action"],
            value=decision.get("value"),
            error=decision.get("error"),
            by=decision["by"],
            reason=decision["reason"],
        )


def _restartable(cell: Cell) -> bool:
    """A finished cell that spawning starts again: it stopped cleanly, or a store failure
    (possibly transient: disk full, lock timeout, I/O error) stopped it, or it lost its lease
    to another runtime (spawning takes the lease again if it is free, else reaches the actor
    where it runs). Recovery reads the truth back from the store; a damaged log or a conflict
    stays stopped."""
    if not cell.done.is_set():
        return False
    return (
        cell.error is None
        or isinstance(cell.error, (StoreUnavailableError, LeaseLostError))
        or isinstance(cell.journal.broken, StoreUnavailableError)
    )


def _client_name() -> str:
    """A unique owner name for a client (it holds no lease; the name labels its asks)."""
    return f"client-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
