"""The door a message comes in by: checked, tagged and unstructured once, as a ``Letter``.

Every way a message enters the runtime passes :func:`admit_message` once: ``ref.send`` and
``ref.ask``, ``ctx.send``, ``ctx.send_later``, ``system.send_later`` and ``schedule`` (when
the timer is put, and again when it fires: the stored message is decoded with the classes
of the runtime that fires it), and a message taken from a PostgreSQL inbox. From then on the
message travels as its ``Letter`` (type tag, plain body), through the system's delivery, a
remote owner's inbox and the cell's post, to the log entry; nothing after the door looks at
the caller's object again. A message from an inbox that this runtime cannot decode comes in
as a ``Letter`` with its decode ``error`` (``undecodable``): its step fails with it.
"""

from __future__ import annotations

from typing import Any, Protocol

from . import codec as _codec

__all__ = ["Learner", "Letter", "admit_message", "undecodable"]


class Learner(Protocol):
    """Where the door records a message class, so that its tag decodes back into it (the
    system's ``Registry``)."""

    def learn(self, cls: type) -> None: ...


class Letter:
    """A message past the door: its type tag and plain (unstructured) body, as the log will
    hold them, and its class (None for an undecodable one)."""

    __slots__ = ("_json", "body", "cls", "error", "type_tag")

    def __init__(
        self, type_tag: str, body: Any, cls: type | None, error: BaseException | None = None
    ) -> None:
        self.type_tag = type_tag
        self.body = body
        self.cls = cls
        #: why this runtime cannot decode it (a message from an inbox), or None
        self.error = error
        self._json: str | None = None

    def encoded(self) -> str:
        """The body as compact JSON text, proven to encode (UTF-8, within the payload limit),
        computed once: for a message stored outside the log (a timer, an inbox) or a check
        that must come before an effect is logged (``ctx.send``).

        Raises:
            EncodeError: the body cannot be encoded, or is larger than the payload limit.
        """
        if self._json is None:
            self._json = _codec.encode_body(self.body, "message", self.cls or type(self))
        return self._json


def admit_message(registry: Learner, msg: object) -> Letter:
    """The door: check that ``msg`` can be a message, tag it, unstructure it, and let the
    ``registry`` learn its class. The one function every sender calls (see the module doc).

    Raises:
        EncodeError: ``msg`` is not an instance of an attrs class, a dataclass or a pydantic
            model, or it cannot be unstructured. Its encoded size is checked when it is
            written (the log entry, or :meth:`Letter.encoded`).
        ConfigurationError: its class has a name that cannot be a type tag.
    """
    _codec.check_attrs_instance(msg, "message")
    cls = type(msg)
    letter = Letter(_codec.type_tag(cls), _codec.to_plain(msg, "message", check=False), cls)
    registry.learn(cls)
    return letter


def undecodable(type_tag: str, body: Any, error: BaseException) -> Letter:
    """A message from an inbox that this runtime cannot decode (a type it does not know yet,
    as in a rolling deploy): posted as it came, its step fails with ``error``."""
    return Letter(type_tag, body, None, error)
