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
from typing import TYPE_CHECKING, Any

import attrs

from . import _codec, _tools
from ._errors import ActorNotFoundError, ConfigurationError, ReadOnlyQueryError

if TYPE_CHECKING:
    from ._actor import Actor
    from ._registry import Registry
    from .store import Store

__all__ = ["check_query", "durable_state", "refuse_in_query", "refuse_in_step", "run"]

#: the actor a query runs for (None outside queries); kept in ``_tools``, which checks it
_QUERY = _tools.QUERY


def refuse_in_query(what: str) -> None:
    """Raise ``ReadOnlyQueryError`` if called from inside a query (an effect it attempts)."""
    where = _QUERY.get()
    if where is not None:
        raise ReadOnlyQueryError(where, what)


def refuse_in_step(actor_id: str) -> None:
    """A handler may not query: the answer is not logged, so its replay could differ.

    Raises:
        ConfigurationError: called inside a handler's step.
    """
    where = _tools.STEP.get()
    if where is not None:
        raise ConfigurationError(
            f"ref.query() of actor {actor_id!r} was called inside the handler of {where}; its "
            "answer would not be logged, so a replay could see another one. Ask the actor "
            "through a logged effect instead (ctx.send, or a tool)"
        )


def check_query(query: object) -> None:
    """A query is a message instance (an attrs class, handled by ``on_query``) or a
    function of the state.

    Raises:
        ConfigurationError: anything else.
    """
    if attrs.has(type(query)) or callable(query):
        return
    raise ConfigurationError(
        "ref.query() takes a query message (an attrs instance, handled by the actor's "
        f"on_query) or a function of the state, not {type(query).__qualname__}"
    )


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
    token = _QUERY.set(where)
    step = _tools.STEP.set(None)  # a query from inside a handler is its own scope
    try:
        if attrs.has(type(query)):
            handler = getattr(cls, "on_query", None)
            if handler is None:
                raise ConfigurationError(
                    f"{cls.__qualname__} declares no on_query(self, query), so it answers no "
                    f"query message ({type(query).__qualname__}); declare one, or pass a "
                    "function of the state: ref.query(lambda state: ...)"
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
        _QUERY.reset(token)
    if _encoded(copy) != before:
        raise ReadOnlyQueryError(where, "changed the state (a query runs on a copy: nothing kept)")
    return result


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
    # light (tests/runtime/test_lazy_imports.py); _replaycheck has the read-only host
    from . import _names, _recovery, _replaycheck
    from ._calls import is_call_error
    from ._context import Context

    row = await store.get_actor(actor_id)
    if row is None:
        raise ActorNotFoundError(f"no actor {actor_id!r} in {store.url}")
    if not _names.answers_to(cls, row.actor_type):
        raise ConfigurationError(_names.class_mismatch(actor_id, row.actor_type, cls))
    actor = cls()
    actor.actor_id = actor_id
    initial = actor.initial_state()
    state_type = type(initial)
    plan = await _recovery.plan(
        store,
        actor_id,
        state_tag=_codec.type_tag(state_type),
        schema_version=cls.schema_version,
        on_reject=lambda _info, _reason: None,
        decode=lambda plain: _codec.structure(plain, state_type),
    )
    actor.state = initial if plan.state_data is None else plan.state
    host = _replaycheck._Host(store, actor_id)
    where = f"{cls.__qualname__} (actor {actor_id!r}, read_state)"
    for m in plan.messages:
        if m.step is None:
            break  # interrupted or not yet handled: not part of the durable state
        try:
            msg = registry.decode_message(m.type_tag, m.body)
        except Exception:
            if _recovery.decode_failed(m.step):
                continue  # live, its handler never ran either
            raise
        ctx = Context(host, m.seq, m.recorded, complete=True, incarnation=m.incarnation)
        try:
            with _tools.in_step(where):
                await actor.receive(ctx, msg)
        except BaseException as exc:
            if not is_call_error(exc):
                raise
        if ctx.fatal is None:
            ctx.check_consumed()
        if ctx.fatal is not None:
            raise ctx.fatal
    return actor.state
