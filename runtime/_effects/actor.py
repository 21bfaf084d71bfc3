"""``Actor``: the base class users subclass."""

from __future__ import annotations

import types
import typing
import weakref
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, Union, get_args, get_origin

import attrs

from .._journal import codec as _codec, names as _names
from .._journal.errors import ConfigurationError

if TYPE_CHECKING:
    from .context import Context

__all__ = ["Actor"]

S = TypeVar("S")


class Actor(Generic[S]):
    """A durable actor. Subclass with an attrs state class and an async ``receive``::

        class Researcher(Actor[Notes]):
            snapshot_every = 50
            async def receive(self, ctx: Context, msg: Ask) -> str: ...

    Optionally also a read-only ``async def on_query(self, query)``: it answers the query
    messages of ``ActorRef.query`` on a copy of the state, between steps, logging nothing
    (docs/queries.md)::

            async def on_query(self, q: LastAnswers) -> list[str]:
                return self.state.answers[-q.n :]

    Class attributes (overridable per spawn with the same keyword arguments):

    * ``snapshot_every``: snapshot after this many steps (None: never by count).
    * ``snapshot_every_seconds``: snapshot when this long has passed since the last one.
    * ``snapshot_keep``: how many snapshots to keep (>= 2, so there is a fallback).
    * ``recovery_budget``: seconds; snapshot whenever recovering the actor would otherwise
      take longer than this (estimated online from measured replay costs; see
      ``docs/tuning.md``). Combines with the other triggers.
    * ``retention``: what compaction may remove from the log: ``"all"`` (default: nothing,
      an audit trail), ``"since-snapshot"`` (entries covered by the oldest kept snapshot),
      or a ``timedelta`` window (the same, but never what was logged within the window).
      See docs/recovery.md, "Retention and compaction".
    * ``schema_version``: bump when the state class changes incompatibly; snapshots of other
      versions are not loaded (recovery replays from an older one or from seq 1 instead).

    Class keywords: ``name="researcher"`` is the stable name the log records for the class
    (default ``module.QualName``); ``aliases=["old.Name"]`` the names it had before, so
    actors created under them still spawn and recover (docs/classes.md, "Names that last").

    ``self.state`` is the state; ``self.actor_id`` the stable id.
    """

    snapshot_every: ClassVar[int | None] = 100
    snapshot_every_seconds: ClassVar[float | None] = None
    snapshot_keep: ClassVar[int] = 3
    recovery_budget: ClassVar[float | None] = None
    retention: ClassVar[str | float | timedelta] = "all"
    schema_version: ClassVar[int] = 1
    state_type: ClassVar[type[Any]]

    state: S
    actor_id: str

    def __init_subclass__(
        cls, *, name: str | None = None, aliases: list[str] | None = None, **kwargs: Any
    ) -> None:
        super().__init_subclass__(**kwargs)
        if name is not None or aliases is not None:  # stable names: runtime/_journal/names.py
            _names.declare(cls, name, aliases)
        for base in getattr(cls, "__orig_bases__", ()):
            if get_origin(base) is Actor:
                (arg,) = get_args(base)
                if isinstance(arg, type):
                    cls.state_type = arg
        st = cls.__dict__.get("state_type")
        if st is not None and not attrs.has(st):
            raise ConfigurationError(
                f"{cls.__qualname__}: the state type {st.__qualname__} must be an attrs class"
            )

    def initial_state(self) -> S:
        """The state of a new actor. Default: the state class called with no arguments."""
        st = getattr(type(self), "state_type", None)
        if st is None:
            raise ConfigurationError(
                f"{type(self).__qualname__} must subclass Actor[StateClass] or override "
                "initial_state()"
            )
        return typing.cast("S", _names.new_state(type(self), st))

    async def receive(self, ctx: Context, msg: Any) -> Any:
        """Handle one message; the return value is the reply to ``ask``."""
        raise NotImplementedError


_HINTS: weakref.WeakKeyDictionary[type, dict[str, dict[str, Any]]] = weakref.WeakKeyDictionary()


def _method_hints(cls: type, method: str) -> dict[str, Any]:
    """``typing.get_type_hints(getattr(cls, method))``, cached per class once it resolves
    (resolving is slow, and every spawn asks; a forward reference that fails now may
    resolve later)."""
    per_class = _HINTS.setdefault(cls, {})
    hints = per_class.get(method)
    if hints is None:
        hints = per_class[method] = typing.get_type_hints(getattr(cls, method))
    return hints


def _receive_hints(cls: type[Actor[Any]]) -> dict[str, Any]:
    return _method_hints(cls, "receive")


def _accepted(cls: type, method: str, param: str, at: int) -> tuple[type, ...] | None:
    """The classes ``method``'s argument ``param`` (else its ``at``-th annotated argument)
    is annotated to accept, or None for "anything"."""
    try:
        hints = _method_hints(cls, method)
    except Exception:
        return None
    ann = hints.get(param)
    if ann is None:
        params = list(hints.items())
        ann = params[at][1] if len(params) > at and params[at][0] != "return" else None
    if ann is None or ann is Any:
        return None
    if get_origin(ann) in (Union, types.UnionType):
        members = tuple(a for a in get_args(ann) if isinstance(a, type))
        return members or None
    return (ann,) if isinstance(ann, type) else None


def accepted_messages(cls: type[Actor[Any]]) -> tuple[type, ...] | None:
    """The message classes ``receive`` is annotated to accept, or None for "anything"."""
    return _accepted(cls, "receive", "msg", 1)  # receive(self, ctx, msg)


def accepted_queries(cls: type[Actor[Any]]) -> tuple[type, ...] | None:
    """The query classes ``on_query`` is annotated to accept, or None for "anything"."""
    return _accepted(cls, "on_query", "query", 0)  # on_query(self, query)


def reply_type(cls: type[Actor[Any]]) -> Any:
    try:
        return _receive_hints(cls).get("return", Any)
    except Exception:
        return Any


def actor_tag(cls: type) -> str:
    return _codec.type_tag(cls)
