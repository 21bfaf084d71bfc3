"""Read-only queries of an actor's state (``ActorRef.query``, ``ActorSystem.read_state``).

A query runs on a *copy* of the state (decoded from its encoded form), between two steps of
the actor, never during one, and logs nothing. It may not act: a tool called directly, or a
``send``/``ask`` through a reference, raises :class:`~actorlog.ReadOnlyQueryError`, and so
does a query that changed its copy of the state (the encoded copy is compared before and
after). The live state is never touched, and nothing the caller receives aliases it.

``read_state`` (and a query of an actor another runtime owns) reads the last *durable* state
instead: the newest valid snapshot plus a replay of the completed steps after it, with every
effect served from the log and no tool run, like recovery but writing nothing.
"""

from __future__ import annotations

import inspect
import json
import time
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import attrs

from .._effects import tools as _tools
from .._effects.actor import accepted_queries
from .._journal import codec as _codec
from .._journal.errors import (
    ActorFinishedError,
    ActorlogError,
    ActorNotFoundError,
    ConfigurationError,
    ReadOnlyQueryError,
)

if TYPE_CHECKING:
    from .._cluster.ownership import Ownership
    from .._effects.actor import Actor
    from .._effects.registry import Registry
    from ..store import Store

__all__ = ["Queries", "durable_state", "run"]


class Queryable(Protocol):
    """What a query needs of a live actor (``Cell``)."""

    cls: type[Actor[Any]]
    actor_id: str
    actor: Actor[Any]
    ready: anyio.Event
    #: held by each step and each query: a query never sees a step's half-done state;
    #: queries waiting when a step ends go first (a fair lock)
    step_lock: anyio.Lock
    holds: int
    last_active: float
    #: (``finished`` | ``terminated``, reason) once the actor ended: still queryable
    ended: tuple[str, str] | None

    @property
    def where(self) -> str: ...

    def check_usable(self) -> None: ...


def _encoded(state: Any) -> str:
    return json.dumps(_codec.to_plain(state, "state"), sort_keys=True, ensure_ascii=False)


async def run(cls: type[Actor[Any]], actor_id: str, state: Any, query: Any, *, where: str) -> Any:
    """Run ``query`` on a copy of ``state``; return what it returns.

    Raises:
        ReadOnlyQueryError: it changed the state, called a tool or sent a message.
        ConfigurationError: a query message and the actor class has no ``on_query``.
        Exception: whatever the query raised, as it raised it.
    """
    copy = _codec.structure(_codec.to_plain(state, "state"), type(state))
    before = _encoded(copy)
    token = _tools.QUERY.set(where)
    step = _tools.STEP.set(None)  # a query from inside a tool is its own scope
    try:
        if attrs.has(type(query)):
            handler = getattr(cls, "on_query", None)
            if handler is None:
                raise ConfigurationError(
                    f"{cls.__qualname__} declares no on_query(self, query), so it answers no "
                    f"query message ({type(query).__qualname__}); declare one, or pass a "
                    "function of the state: ref.query(lambda state: ...)"
                )
            accepts = accepted_queries(cls)
            if accepts is not None and not isinstance(query, accepts):
                raise ConfigurationError(
                    f"{cls.__qualname__}.on_query does not accept queries of type "
                    f"{type(query).__qualname__} (it is annotated to take "
                    f"{' | '.join(a.__qualname__ for a in accepts)})"
                )
            actor = cls()
            actor.actor_id = actor_id
            actor.state = copy
            result = await actor.on_query(query)  # type: ignore[attr-defined]  # checked above
        else:
            result = query(copy)
            if inspect.isawaitable(result):
                result = await result
    finally:
        _tools.STEP.reset(step)
        _tools.QUERY.reset(token)
    if _encoded(copy) != before:
        raise ReadOnlyQueryError(where, "changed the state (a query runs on a copy: nothing kept)")
    return result


async def _in_cell(cell: Queryable, query: Any) -> Any:
    """Run a query on the live actor's current state, between two of its steps."""
    if not cell.ready.is_set():
        await cell.ready.wait()
    if cell.ended is None:  # an ended actor runs no more steps; its state stays readable
        cell.check_usable()
    async with cell.step_lock:
        if cell.ended is None:
            cell.check_usable()
        return await run(cell.cls, cell.actor_id, cell.actor.state, query, where=cell.where)


class _SystemParts(Protocol):
    store: Store
    registry: Registry
    _ownership: Ownership | None
    _cells: dict[str, Any]

    def _check_open(self) -> Any: ...

    async def _cell(self, cls: type[Actor[Any]], actor_id: str) -> Any: ...

    async def read_state(self, cls: type[Actor[Any]], actor_id: str) -> Any: ...


class Queries:
    """``ActorSystem.read_state`` and the system's side of ``ActorRef.query`` (mixed in)."""

    async def _query(
        self: _SystemParts,
        cls: type[Actor[Any]],
        actor_id: str,
        query: Any,
        *,
        timeout: float | None,
    ) -> Any:
        """On the live state of the actor's cell here (started if needed), or, when another
        runtime owns it (or this is a client), on its last durable state. An actor the
        store does not hold is not created (``ActorNotFoundError``): a query writes
        nothing."""
        with anyio.fail_after(timeout):
            own = self._ownership
            # before routing: with leases, routing starts (so registers) the actor
            if actor_id not in self._cells and await self.store.get_actor(actor_id) is None:
                raise ActorNotFoundError(
                    f"no actor {actor_id!r} in {self.store.url}: a query creates none "
                    "(spawn it, or ask it, first)"
                )
            try:
                remote = own is not None and not await own.route(cls, actor_id)
                cell: Queryable | None = None if remote else await self._cell(cls, actor_id)
            except ActorFinishedError:  # ended, not loaded: its last state is in the log
                cell = None
            if cell is None:
                state = await self.read_state(cls, actor_id)
                where = f"{cls.__qualname__} (actor {actor_id!r}, durable state)"
                return await run(cls, actor_id, state, query, where=where)
            try:
                return await _in_cell(cell, query)
            finally:
                cell.holds -= 1
                cell.last_active = time.monotonic()

    async def read_state(self: _SystemParts, cls: type[Actor[Any]], actor_id: str) -> Any:
        """The actor's last durable state, read from the store, whether or not it is loaded
        (here or on another runtime): its newest valid snapshot plus the completed steps
        logged after it, replayed with every effect served from the log. No tool runs,
        nothing is written, no lease is taken, the actor is not started. A step in progress
        (or interrupted by a crash) is not in it, nor are messages not yet handled. The
        state returned is a fresh object: changing it changes nothing stored.

        A cancellation point (it only reads).

        Raises:
            ActorNotFoundError: no actor ``actor_id`` in the store.
            ConfigurationError: the actor was created with another class.
            CorruptEntryError, LogCompactedError, NonDeterminismError: as its recovery would
                (damage in the log; a log whose start was compacted away without a usable
                snapshot; handler code that no longer replays the recorded steps).
        """
        self._check_open()
        _codec.validate_actor_id(actor_id)
        self.registry.register(cls)
        return await durable_state(self.store, self.registry, cls, actor_id)


async def durable_state(
    store: Store, registry: Registry, cls: type[Actor[Any]], actor_id: str
) -> Any:
    """The actor's last durable state: its newest valid snapshot, plus the completed steps
    logged after it replayed with their effects served from the log (no tool runs, nothing
    is written). A step that was interrupted (no ``step`` entry yet) is not in it.

    Raises:
        ActorNotFoundError: no such actor in the store.
        ConfigurationError: the actor is of another class.
        CorruptEntryError, LogCompactedError, NonDeterminismError: as recovery would.
    """
    # imported here: ``import actorlog`` (which imports this module for ``ActorRef``) stays
    # light (tests/runtime/test_lazy_imports.py)
    from .._core.readonly import ReadOnlyHost
    from .._core.replay import handler_never_ran, run_recorded
    from .._durability.plan import plan as read_plan
    from .._effects.context import Context
    from .._journal import names as _names

    row = await store.get_actor(actor_id)
    if row is None:
        raise ActorNotFoundError(f"no actor {actor_id!r} in {store.url}")
    if not _names.answers_to(cls, row.actor_type):
        raise ConfigurationError(_names.class_mismatch(actor_id, row.actor_type, cls))
    actor = cls()
    actor.actor_id = actor_id
    initial = actor.initial_state()
    state_type = type(initial)
    plan = await read_plan(
        store,
        actor_id,
        state_tag=_codec.type_tag(state_type),
        schema_version=cls.schema_version,
        on_reject=lambda _info, _reason: None,
        decode=lambda plain: _codec.structure(plain, state_type),
    )
    actor.state = initial if plan.state_data is None else plan.state
    host = ReadOnlyHost(store, actor_id, registry)
    where = f"{cls.__qualname__} (actor {actor_id!r}, read_state)"
    for m in plan.messages:
        if m.step is None:
            break  # interrupted or not yet handled: not part of the durable state
        if handler_never_ran(m):
            continue  # refused (the actor had ended) or undecodable: its handler never ran
        msg = registry.decode_message(m.type_tag, m.body)
        ctx = Context(host, m.seq, m.recorded, complete=True, incarnation=m.incarnation)
        raised = await run_recorded(actor, ctx, msg, m, where)
        if ctx.fatal is None:
            try:
                ctx.check_consumed(raised)
            except ActorlogError:
                pass  # as recovery: the fatal error it sets is raised below
        if ctx.fatal is not None:
            raise ctx.fatal
    return actor.state
