"""Ids: checking actor ids and message ids, and making fresh ones (FORMAT.md [F11], [F13]).

Their error messages show values with ``_checks.shown`` (the bounded ``repr``).
``_codec`` re-exports these names, where most of the runtime calls them.
"""

from __future__ import annotations

import os
import uuid

from ._checks import is_utf8, shown
from ._errors import ConfigurationError

__all__ = [
    "MAX_ACTOR_ID_CHARS",
    "NO_MESSAGE_ID",
    "new_incarnation",
    "new_message_id",
    "validate_actor_id",
    "validate_message_id",
]

#: [F11] Actor ids: 1..200 characters, no control characters.
MAX_ACTOR_ID_CHARS = 200
#: The message-id length in the checksum frame that marks "no message id" ([F4]).
NO_MESSAGE_ID = 0xFFFF


def validate_actor_id(actor_id: object) -> str:
    """Return ``actor_id`` if it is a valid id, else raise ``ConfigurationError``."""
    if not isinstance(actor_id, str):
        raise ConfigurationError(
            f"actor id must be a str, got {type(actor_id).__qualname__} {shown(actor_id)}: an id "
            f"is a stable name such as 'run-42' (for a number, pass f\"run-{{n}}\")"
        )
    if not actor_id:
        raise ConfigurationError(
            "actor id must not be empty: an id is a stable name such as 'run-42', the same "
            "on every spawn (it is how a restarted actor is found again)"
        )
    if len(actor_id) > MAX_ACTOR_ID_CHARS:
        raise ConfigurationError(
            f"actor id is {len(actor_id)} characters; the limit is {MAX_ACTOR_ID_CHARS} "
            "(for a long natural key, use a digest of it, e.g. hashlib.sha256(key).hexdigest())"
        )
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in actor_id):
        raise ConfigurationError(
            f"actor id {shown(actor_id)} contains control characters (newlines, tabs, ...): "
            "use printable text"
        )
    if not is_utf8(actor_id):
        raise ConfigurationError(
            f"actor id {shown(actor_id)} contains lone surrogates (text decoded with "
            "'surrogateescape'?); ids are stored as UTF-8: decode them properly first"
        )
    return actor_id


def validate_message_id(message_id: object) -> str | None:
    """Return ``message_id`` if it is ``None`` or a valid message id, else raise
    ``ConfigurationError`` (nothing has been written)."""
    if message_id is None:
        return None
    if not isinstance(message_id, str) or not message_id:
        raise ConfigurationError("message_id must be a non-empty str")
    if not is_utf8(message_id):
        raise ConfigurationError(
            f"message_id {shown(message_id)} contains lone surrogates; it is stored as UTF-8"
        )
    if "\x00" in message_id:
        # PostgreSQL text cannot hold NUL: refused on every store, so a log moves freely
        raise ConfigurationError(f"message_id {shown(message_id)} contains a NUL character")
    if len(message_id.encode()) >= NO_MESSAGE_ID:
        raise ConfigurationError(f"message_id is too long (limit {NO_MESSAGE_ID - 1} bytes)")
    return message_id


def new_incarnation() -> str:
    """[F13] A fresh incarnation id for a log that starts: 16 random hex digits."""
    return os.urandom(8).hex()


def new_message_id() -> str:
    """A fresh message id for a message sent without one."""
    return uuid.uuid4().hex
