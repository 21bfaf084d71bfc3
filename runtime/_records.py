"""The payload of each entry kind (FORMAT.md [F5]): plain JSON objects, built and parsed here.

Rows are built with :func:`actorlog._codec.make_row`; this module only decides which keys a
payload has, so the runtime, recovery and the operator tools agree on one shape.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

import attrs

from . import _codec
from ._errors import CorruptEntryError
from .store import EntryRow, EventRow

__all__ = [
    "Recorded",
    "decode",
    "error_info",
    "message_payload",
    "saved_options",
]


#: [F5] Longest error message (in characters) an entry keeps; a longer one is cut, with a
#: marker saying how long it was.
MAX_ERROR_CHARS = 16 * 1024
_MAX_ERROR_TYPE_CHARS = 256


def loggable_text(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` as it can always be logged: lone surrogates (a body decoded with
    ``surrogateescape``, say) written as ``\\udcff`` escapes, and cut to ``limit``
    characters with a marker naming the full length."""
    try:
        text.encode()
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode()
    if len(text) > limit:
        text = f"{text[:limit]}... [truncated: {len(text)} characters in all]"
    return text


def error_info(exc: BaseException) -> dict[str, str]:
    """[F5] An error as a step or result records it: its type's qualified name and its
    message, always loggable (see :func:`loggable_text`), also when ``str(exc)`` raises."""
    try:
        message = str(exc)
    except Exception as broken:  # a broken __str__ must not leave the outcome unlogged
        message = f"<str() of the error raised {type(broken).__qualname__}>"
    return {
        "type": loggable_text(type(exc).__qualname__, _MAX_ERROR_TYPE_CHARS),
        "message": loggable_text(message),
    }


def message_payload(
    body: Any, *, sender: str | None, trace: dict[str, str] | None
) -> dict[str, Any]:
    """``message``: the unstructured message, who sent it, the sender's W3C trace context."""
    return {"body": body, "sender": sender, "trace": trace, "at": time.time()}


def intent_payload(
    *,
    index: int,
    effect: str,
    policy: str,
    args: list[Any],
    kwargs: dict[str, Any],
    key: str,
) -> dict[str, Any]:
    """``intent`` (type_tag = tool name, ref = step's message seq)."""
    return {
        "index": index,
        "effect": effect,
        "policy": policy,
        "args": args,
        "kwargs": kwargs,
        "key": key,
        "at": time.time(),
    }


def result_payload(
    *,
    value: Any = None,
    error: dict[str, str] | None = None,
    attempt: int = 1,
    duration: float = 0.0,
    settled_by: str = "run",
) -> dict[str, Any]:
    """``result`` (type_tag = tool name, ref = intent seq).

    ``settled_by`` is ``run`` (the tool ran), ``reconcile`` (its reconcile fn answered), or
    ``cancelled`` (the handler's own cancel scope cancelled the call and the step went on).
    """
    p: dict[str, Any] = {
        "ok": error is None,
        "attempt": attempt,
        "duration": duration,
        "settled_by": settled_by,
        "at": time.time(),
    }
    if error is None:
        p["value"] = value
    else:
        p["error"] = error
    return p


def effect_payload(*, index: int, value: Any) -> dict[str, Any]:
    """``effect`` (type_tag = now|random|uuid|send|spawn, ref = step's message seq)."""
    return {"index": index, "value": value, "at": time.time()}


def step_payload(
    *,
    reply: Any = None,
    error: dict[str, str] | None = None,
    span: dict[str, str] | None = None,
    duration: float = 0.0,
) -> dict[str, Any]:
    """``step`` (type_tag = message type tag, ref = message seq)."""
    p: dict[str, Any] = {"ok": error is None, "span": span, "duration": duration, "at": time.time()}
    if error is None:
        p["reply"] = reply
    else:
        p["error"] = error
    return p


def decision_payload(
    *,
    action: str,
    value: Any = None,
    error: dict[str, str] | None = None,
    by: str,
    reason: str,
) -> dict[str, Any]:
    """``decision`` (type_tag = result|retry|fail, ref = intent seq): an operator's ruling."""
    p: dict[str, Any] = {"action": action, "by": by, "reason": reason, "at": time.time()}
    if action == "result":
        p["value"] = value
    if action == "fail":
        p["error"] = error
    return p


def decode(row: EntryRow) -> dict[str, Any]:
    """Parse a verified row's payload. Raises ``CorruptEntryError(check="decode")``."""
    try:
        obj = _codec.decode_json(row.payload)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptEntryError(row.actor_id, row.seq, "decode", str(exc)) from exc
    if not isinstance(obj, dict):
        raise CorruptEntryError(row.actor_id, row.seq, "decode", "payload is not a JSON object")
    return obj


def saved_options(events: Iterable[EventRow]) -> tuple[dict[str, Any], str] | None:
    """The spawn options last saved for an actor (its newest undamaged ``options`` event
    whose detail is a JSON object), as (options, the event's detail); None if none."""
    found = None
    for ev in events:
        if ev.kind == "options" and ev.damage is None:
            try:
                value = json.loads(ev.detail)
            except ValueError:
                continue
            if isinstance(value, dict):
                found = (value, ev.detail)
    return found


@attrs.define
class Recorded:
    """One effect recorded for a step: an intent (with what settled it) or a plain effect."""

    kind: str  # "intent" | "effect"
    seq: int
    type_tag: str
    payload: dict[str, Any]
    #: for intents: the result/decision payloads that refer to it, in log order
    outcomes: list[tuple[str, str, dict[str, Any]]] = attrs.Factory(list)
