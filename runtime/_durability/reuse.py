"""A message id names one message: telling a retry (the same message again) from a reuse of
the id for another message (``MessageIdReusedError``).

Both messages are compared in their canonical encoded form under the classes this runtime
knows: each is decoded into its message class and encoded again, so that what the codec
makes equal is equal (a field added since with its default, an ``int`` given where the class
says ``float``, a type logged under an alias of its tag), and a set field compares by the
codec's own canonical encoding. A message no class decodes is compared as logged (tag and
encoded body).
"""

from __future__ import annotations

from typing import Any, Protocol

from .._journal import codec as _codec
from .._journal.errors import ConfigurationError, CorruptEntryError, MessageIdReusedError
from .._journal.records import MessageRecord, decode_entry
from ..store import EntryRow

__all__ = ["check_same_message", "logged_message"]


class _Decoder(Protocol):
    def decode_message(self, tag: str, body: Any) -> Any: ...


def logged_message(row: EntryRow) -> tuple[str, Any]:
    """The type tag and plain body of a message entry (its checksum already verified).

    Raises:
        CorruptEntryError: the entry found under a message id is not a message.
    """
    record = decode_entry(row)
    if not isinstance(record, MessageRecord):
        raise CorruptEntryError(
            row.actor_id, row.seq, "kind", f"found by its message id but is a {row.kind}"
        )
    return row.type_tag, record.body


def _canonical(registry: _Decoder, tag: str, body: Any) -> tuple[str, bytes]:
    try:
        msg = registry.decode_message(tag, body)
    except ConfigurationError:  # no class for it here: as logged
        return tag, _codec.encode_plain({"body": body}, "message")
    plain = _codec.to_plain(msg, "message", check=False)
    return _codec.type_tag(type(msg)), _codec.encode_plain({"body": plain}, "message")


def check_same_message(
    registry: _Decoder,
    actor_id: str,
    message_id: str,
    seq: int | None,
    recorded: tuple[str, Any],
    given: tuple[str, Any],
) -> None:
    """Raise ``MessageIdReusedError`` unless ``given`` (type tag, plain body) is the message
    ``recorded`` under ``message_id`` at ``seq``. Costs two decodes and two encodes: only a
    retried id pays it, never a fresh one."""
    was = _canonical(registry, *recorded)
    now = _canonical(registry, *given)
    if was != now:
        raise MessageIdReusedError(actor_id, message_id, seq, was[0], now[0])
