"""The type registry: which actor and message classes a system knows, by their log tags.

Encoding a message needs only its class's tag (``_codec.type_tag``); decoding one from the
log needs the class the tag names. This is the one place that maps tags back to classes, so
the cell, recovery and the inbox decode through it and never through the ``ActorSystem``.
"""

from __future__ import annotations

import sys
from typing import Any

from . import _codec
from ._actor import Actor, accepted_messages
from ._errors import ConfigurationError

__all__ = ["Registry"]


class Registry:
    """Actor classes a system may run, and message classes it can decode, by tag."""

    __slots__ = ("_actors", "_messages")

    def __init__(self) -> None:
        self._actors: dict[str, type[Actor[Any]]] = {}
        self._messages: dict[str, type] = {}

    def register(self, cls: type[Actor[Any]]) -> None:
        """Allow ``cls`` to run (and be recovered); learn the messages ``receive`` names."""
        if not (isinstance(cls, type) and issubclass(cls, Actor)):
            raise ConfigurationError(f"{cls!r} is not an Actor subclass")
        self._actors[_codec.type_tag(cls)] = cls
        for m in accepted_messages(cls) or ():
            self.learn(m)

    def actor_class(self, tag: str) -> type[Actor[Any]] | None:
        """The registered actor class logged as ``tag``, or None."""
        return self._actors.get(tag)

    def learn(self, cls: type) -> None:
        """Remember a message class (the first class seen for a tag stays)."""
        tag = _codec.type_tag(cls)
        if tag not in self._messages:
            self._messages[tag] = cls

    def decode_message(self, tag: str, body: Any) -> Any:
        """The message logged as ``tag`` with plain ``body``, structured into its class.

        A tag never learned is looked up as ``module.QualName`` among imported modules.

        Raises:
            ConfigurationError: the tag names no known class, or the body does not fit it.
        """
        cls = self._messages.get(tag)
        if cls is None:
            module, _, qual = tag.rpartition(".")
            mod = sys.modules.get(module)
            obj: Any = mod
            for part in qual.split(".") if mod is not None else ():
                obj = getattr(obj, part, None)
            if isinstance(obj, type):
                cls = obj
                self._messages[tag] = obj
        if cls is None:
            raise ConfigurationError(
                f"unknown message type {tag!r}: register its class with "
                "ActorSystem(messages=[...]) or annotate receive() with it"
            )
        try:
            return _codec.converter.structure(body, cls)
        except Exception as exc:
            raise ConfigurationError(f"cannot decode message of type {tag!r}: {exc}") from exc
