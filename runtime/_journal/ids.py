"""Ids: checking actor ids and message ids, and making fresh ones (FORMAT.md [F11], [F13]).

Their error messages show values with ``_checks.shown`` (the bounded ``repr``).
``_codec`` re-exports these names, where most of the runtime calls them.
"""

from __future__ import annotations

import os

from .checks import is_utf8, shown, validate_int, validate_text
from .errors import ConfigurationError

__all__ = [
    "idempotency_key",
    "MAX_ACTOR_ID_CHARS",
    "NO_MESSAGE_ID",
    "new_incarnation",
    "new_message_id",
    "step_key",
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
    try:
        size = len(message_id.encode())  # once: the UTF-8 check and the size (an id an ask)
    except UnicodeEncodeError:
        raise ConfigurationError(
            f"message_id {shown(message_id)} contains lone surrogates; it is stored as UTF-8"
        ) from None
    if "\x00" in message_id:
        # PostgreSQL text cannot hold NUL: refused on every store, so a log moves freely
        raise ConfigurationError(f"message_id {shown(message_id)} contains a NUL character")
    if size >= NO_MESSAGE_ID:
        raise ConfigurationError(f"message_id is too long (limit {NO_MESSAGE_ID - 1} bytes)")
    return message_id


def new_incarnation() -> str:
    """[F13] A fresh incarnation id for a log that starts: 16 random hex digits."""
    return os.urandom(8).hex()


def new_message_id() -> str:
    """A fresh message id for a message sent without one."""
    import uuid  # here: a run whose messages all carry ids never imports it

    return uuid.uuid4().hex


def idempotency_key(
    actor_id: str, step_seq: int, index: int, *, incarnation: str | None = None, task: str = ""
) -> str:
    """[F13] The stable idempotency key of call ``index`` of the step handling message
    ``step_seq``: ``"{actor_id}:{incarnation}:{step_seq}:{index}"``, the same on every
    replay and restart, unique per call and per incarnation of the actor's log (a new one
    after ``delete`` and a new actor with the same id, in a fresh database, in a fork).
    ``incarnation`` is the one recorded in the step's message entry; a message logged
    before incarnations existed has none, and its calls keep the old key
    ``"{actor_id}:{step_seq}:{index}"``. [F18] A call made by a task the handler spawned
    (``task``, e.g. ``"1.0"``) ends in ``"{task}.{index}"`` instead of ``"{index}"``: the
    last component is always the call's number within its task, so keys stay unique.

    Raises:
        ConfigurationError: a malformed argument; ``task`` is not a task path ("" or
            numbers joined by ".").
    """
    validate_actor_id(actor_id)
    validate_int(step_seq, "step_seq")
    validate_int(index, "index")
    if type(task) is not str or (task and not _is_path(task)):
        raise ConfigurationError(
            "idempotency_key(): task must be a task path such as '1.0' ('' for the "
            f"handler's own task), not {shown(task)}"
        )
    if task:
        index_part = f"{task}.{index}"
        if incarnation is None:
            return f"{actor_id}:{step_seq}:{index_part}"
        return f"{actor_id}:{incarnation}:{step_seq}:{index_part}"
    if incarnation is None:
        return f"{actor_id}:{step_seq}:{index}"
    return f"{actor_id}:{validate_text(incarnation, 'incarnation')}:{step_seq}:{index}"


#: (actor id, incarnation) -> the head of their keys, checked once (bounded)
_KEY_HEADS: dict[tuple[str, str | None], str] = {}


def step_key(actor_id: str, step_seq: int, index: int, incarnation: str | None, task: str) -> str:
    """``idempotency_key`` for the runtime's own calls (a step's seq, a call's index and a
    task path it made itself): the same key, with the actor id and incarnation checked
    once per pair rather than per call."""
    head = _KEY_HEADS.get((actor_id, incarnation))
    if head is None:
        head = idempotency_key(actor_id, 0, 0, incarnation=incarnation)[: -len(":0:0")]
        if len(_KEY_HEADS) < 4096:
            _KEY_HEADS[actor_id, incarnation] = head
    if task:
        return f"{head}:{step_seq}:{task}.{index}"
    return f"{head}:{step_seq}:{index}"


def _is_path(task: str) -> bool:
    return all(part.isascii() and part.isdigit() for part in task.split("."))
