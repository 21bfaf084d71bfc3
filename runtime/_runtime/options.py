"""Spawn options: the snapshot settings ``spawn`` gives an actor, held for good.

They override the class attributes for that actor in this runtime (through passivation
and restarts) and are saved in the store as an ``options`` event, so a later process starts
the actor with them too (docs/tuning.md). They tune snapshots and retention (what
compaction may remove), never correctness.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from typing import Any, cast

from .._durability import retention as _retention
from .._durability.snapshots import SnapshotPolicy
from .._effects.actor import Actor
from .._journal import codec as _codec
from .._journal.errors import ActorlogError, ConfigurationError
from .._journal.records import EventKind
from ..store import Store

__all__ = ["NAMES", "SpawnOptions"]

logger = logging.getLogger("actorlog")

#: the options ``spawn`` takes, as they are saved
NAMES = (
    "snapshot_every",
    "snapshot_every_seconds",
    "snapshot_keep",
    "recovery_budget",
    "retention",
)


def given(values: tuple[Any, ...], missing: Any) -> dict[str, Any]:
    """The options a ``spawn`` gave (``values`` in the order of ``NAMES``; ``missing``:
    not given), as they are saved (a retention window as seconds).

    Raises:
        ConfigurationError: a bad ``retention``.
    """
    options = {k: v for k, v in zip(NAMES, values, strict=True) if v is not missing}
    if "retention" in options:
        options["retention"] = _retention.parse(options["retention"])
    return options


def policy(cls: type[Actor[Any]], options: dict[str, Any]) -> SnapshotPolicy:
    """The snapshot policy of ``cls`` with ``options`` over its class attributes.

    Raises:
        ConfigurationError: an unknown option, or a value the policy refuses.
    """
    unknown = set(options) - set(NAMES)
    if unknown:
        raise ConfigurationError(f"unknown spawn options: {', '.join(sorted(unknown))}")
    return SnapshotPolicy(
        every=options.get("snapshot_every", cls.snapshot_every),
        every_seconds=options.get("snapshot_every_seconds", cls.snapshot_every_seconds),
        keep=options.get("snapshot_keep", cls.snapshot_keep),
        recovery_budget=options.get("recovery_budget", cls.recovery_budget),
        retention=options.get("retention", cls.retention),
    )


class SpawnOptions:
    """The options in effect per actor id in one runtime."""

    __slots__ = ("given",)

    def __init__(self) -> None:
        #: actor id -> the options in effect (given by a spawn here, or read back)
        self.given: dict[str, dict[str, Any]] = {}

    def policy_for(self, cls: type[Actor[Any]], actor_id: str) -> SnapshotPolicy:
        """The policy of an actor started without options: those in effect for it, else
        its class attributes."""
        return policy(cls, self.given.get(actor_id, {}))

    def adopt(
        self, cls: type[Actor[Any]], actor_id: str, saved: dict[str, Any]
    ) -> SnapshotPolicy | None:
        """Options read back from the store: the policy they give, unless a ``spawn`` here
        gave options already (they hold) or the saved ones are damaged (the class
        attributes hold): then None."""
        if actor_id in self.given:
            return None
        try:
            found = policy(cls, saved)
        except ConfigurationError:
            return None
        self.given[actor_id] = saved
        return found

    @staticmethod
    async def save(store: Store, actor_id: str, options: dict[str, Any]) -> bool:
        """Save options with the actor (an ``options`` event). A store failure does not
        fail the spawn: the options hold in this runtime, a warning is logged, and False
        says the next ``spawn`` with options should save them again."""
        try:
            await store.record_event(
                actor_id, EventKind.OPTIONS, json.dumps(options, sort_keys=True)
            )
        except ActorlogError as exc:
            logger.warning(
                "actor %r: spawn options %s hold in this system but could not be saved: %s",
                actor_id,
                options,
                exc,
            )
            return False
        return True


#: what an object must have to be taken as a ``Store`` (the protocol's public members)
_STORE_MEMBERS = tuple(name for name in dir(Store) if not name.startswith("_"))


def store_of(store: object) -> Store:
    """``store=`` of ``ActorSystem``: a ``Store``, or a store URL opened here.

    Raises:
        ConfigurationError: neither (the value shown bounded).
    """
    if isinstance(store, str):
        from actorlog.stores import open_store

        return open_store(store)
    if isinstance(store, Store) or all(hasattr(store, name) for name in _STORE_MEMBERS):
        # hasattr too: on 3.12+ isinstance() against a protocol looks attributes up
        # statically, so a store wrapper that delegates by __getattr__ would be refused
        return cast(Store, store)
    raise ConfigurationError(
        f"store must be a Store or a store URL, not {type(store).__qualname__} "
        f"{_codec.shown(store)}"
    )


def classes(
    value: object, what: str, *, each: Callable[[object], None] | None = None
) -> tuple[type, ...]:
    """``actors=`` / ``messages=`` of ``ActorSystem``: an iterable of classes (None: none),
    each checked by ``each`` if given (``actors``: ``_names.check_actor_class``, which says
    "pass the class itself" for an instance), else as a class.

    Raises:
        ConfigurationError: naming the argument and what it holds.
    """
    if value is None:
        return ()
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ConfigurationError(
            f"{what} must be a list of classes, not {type(value).__qualname__} "
            f"{_codec.shown(value)}"
        )
    got = tuple(value)
    for cls in got:
        if each is not None:
            each(cls)
        elif not isinstance(cls, type):
            raise ConfigurationError(
                f"{what} must hold classes, not {type(cls).__qualname__} {_codec.shown(cls)}"
            )
    return got


def check_system(
    *,
    max_actors: object,
    shutdown_grace: object,
    passivate_after: object,
    lease_ttl: object,
    poll_interval: object,
    reply_poll_interval: object,
) -> None:
    """Check ``ActorSystem``'s tuning arguments (None: not given, where allowed).

    Raises:
        ConfigurationError: naming the argument and the value given.
    """
    if max_actors is not None and (
        not isinstance(max_actors, int) or isinstance(max_actors, bool) or max_actors < 1
    ):
        raise ConfigurationError(
            f"max_actors must be a positive int, not {_codec.shown(max_actors)}"
        )
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
                f"{name} must be a positive number of seconds, not {_codec.shown(seconds)}"
            )
    if isinstance(shutdown_grace, bool) or not (
        isinstance(shutdown_grace, (int, float)) and 0 <= shutdown_grace < float("inf")
    ):
        raise ConfigurationError(
            f"shutdown_grace must be a number of seconds >= 0, not {_codec.shown(shutdown_grace)}"
        )
