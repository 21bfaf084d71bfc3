"""The type registry: which actor and message classes a system knows, by their log tags.

Encoding a message needs only its class's tag (``_codec.type_tag``); decoding one from the
log needs the class the tag names. This is the one place that maps tags back to classes, so
the cell, recovery and the inbox decode through it and never through the ``ActorSystem``.
"""

from __future__ import annotations

from typing import Any

from .._journal import codec as _codec, names as _names
from .._journal.errors import ConfigurationError
from .actor import Actor, accepted_messages

__all__ = ["Registry"]


class Registry:
    """Actor classes a system may run, and message classes it can decode, by tag."""

    __slots__ = ("_actors", "_learned", "_messages")

    def __init__(self) -> None:
        self._actors: dict[str, type[Actor[Any]]] = {}
        self._messages: dict[str, type] = {}
        self._learned: set[type] = set()

    def register(self, cls: type[Actor[Any]]) -> None:
        """Allow ``cls`` to run (and be recovered); learn the messages ``receive`` names.
        Both replace the classes registered before under the same tags (and aliases)."""
        _names.check_actor_class(cls)
        _names.learn(self._actors, cls, replace=True)  # its name and aliases
        for m in accepted_messages(cls) or ():
            # the classes this actor accepts replace earlier ones of their tags: after a
            # hot fix (``importlib.reload``, then ``register``) messages decode into the new
            # classes, which the new ``receive`` accepts
            _names.learn(self._messages, m, replace=True)
            self._learned.add(m)

    def actor_class(self, tag: str) -> type[Actor[Any]] | None:
        """The registered actor class logged as ``tag``, or None."""
        return self._actors.get(tag)

    def learn(self, cls: type) -> None:
        """Remember a message class under its tag and aliases (the first class seen for a
        tag stays)."""
        if cls in self._learned:
            return  # every post learns its message's class: once is enough
        _names.learn(self._messages, cls)  # its name and aliases
        self._learned.add(cls)

    def decode_message(self, tag: str, body: Any) -> Any:
        """The message logged as ``tag`` with plain ``body``, structured into its class.

        A tag never learned is looked up as a declared name, or as ``module.QualName``
        among imported modules.

        Raises:
            ConfigurationError: the tag names no known class, or the body does not fit it.
        """
        cls = self._messages.get(tag)
        if cls is None:
            cls = _names.find_class(tag)  # a declared name, or module.QualName
            if cls is not None:
                self._messages[tag] = cls
        if cls is None:
            raise ConfigurationError(_names.unknown_message(tag))
        try:
            return _codec.structure(body, cls)
        except Exception as exc:
            raise ConfigurationError(f"cannot decode message of type {tag!r}: {exc}") from exc
