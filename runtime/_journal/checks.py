"""Checks of argument values shared by the runtime, the operator API and the stores: each
kind of value has one validator, and every error message shows the value bounded
(:func:`shown`). A leaf module (``actorlog.store`` re-exports what a store needs)."""

from __future__ import annotations

import json
import math
import reprlib
from typing import Any

from .errors import ConfigurationError

__all__ = [
    "MAX_JSON_DEPTH",
    "is_utf8",
    "parse_json",
    "shown",
    "validate_int",
    "validate_name",
    "validate_optional_text",
    "validate_seconds",
    "validate_stable_name",
    "validate_text",
]

#: [F8] A stable name (a class's tag, a tool's name) is at most this many bytes of UTF-8.
MAX_NAME_BYTES = 1024

_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxstring, _SHOWN.maxother = 3, 80, 80


def shown(value: object) -> str:
    """``repr(value)`` bounded for an error message: a 2,000-level nested list or a 100 kB
    string shows as a short prefix (a plain ``repr`` of the first raises RecursionError)."""
    return _SHOWN.repr(value)


def is_utf8(text: str) -> bool:
    """Can ``text`` be stored as UTF-8 (no lone surrogates)?"""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def validate_text(value: object, what: str) -> str:
    """Return ``value`` if it is free text that every store records as it is (a reason, who
    did it, a failure message): a ``str``, empty allowed, with no NUL character (PostgreSQL
    text cannot hold one) and no lone surrogates (it is stored as UTF-8, and a history that
    shows it must be printable); else raise ``ConfigurationError`` (nothing written)."""
    if not isinstance(value, str):
        raise ConfigurationError(
            f"{what} must be a str, got {type(value).__qualname__} {shown(value)}"
        )
    if "\x00" in value:
        raise ConfigurationError(f"{what} {shown(value)} contains a NUL character")
    if not is_utf8(value):
        raise ConfigurationError(
            f"{what} {shown(value)} contains lone surrogates (text decoded with "
            "'surrogateescape'?); it is stored as UTF-8: decode it properly first"
        )
    return value


def validate_seconds(
    value: object, what: str, *, positive: bool = False, maximum: float = math.inf
) -> float:
    """Return ``value`` (a number of seconds: an int or float, not a bool) as a float if it
    is finite (and > 0 with ``positive``, at most ``maximum``); else raise
    ``ConfigurationError`` naming ``what`` (nothing written)."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    try:
        seconds = float(value) if ok else math.nan  # type: ignore[arg-type]
    except OverflowError:  # an int too large for a float
        seconds = math.nan
    if not math.isfinite(seconds) or (positive and seconds <= 0) or seconds > maximum:
        limits = "a finite number" + (" > 0" if positive else "")
        if maximum < math.inf:
            limits += f" up to {maximum:g}"
        raise ConfigurationError(f"{what} takes seconds ({limits}), not {shown(value)}")
    return seconds


def validate_name(value: object, what: str) -> str:
    """``validate_text`` that must not be blank: a name (an owner, a runtime)."""
    if not validate_text(value, what).strip():
        raise ConfigurationError(f"{what} must not be empty, got {shown(value)}")
    return value  # type: ignore[return-value]


def validate_int(value: object, what: str) -> int:
    """Return ``value`` if it is an int (not a bool: a seq, a count, an index); else raise
    ``ConfigurationError`` naming ``what``."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigurationError(
            f"{what} must be an int, not {type(value).__qualname__} {shown(value)}"
        )
    return value


def has_control(text: str) -> bool:
    """Does ``text`` hold a control character (C0, DEL or C1: NUL, newline, tab, ...)?"""
    return any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in text)


def validate_stable_name(value: object, what: str) -> str:
    """Return ``value`` if it can be a stable name the log records (FORMAT.md [F8]: a
    class's declared name or alias, a tool's name): non-blank printable text (no control
    characters: PostgreSQL text cannot hold NUL, and a name is shown on terminals and
    pages), valid UTF-8, at most ``MAX_NAME_BYTES``; else raise ``ConfigurationError``."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"{what} must be a non-empty str, not {shown(value)}")
    if has_control(value):
        raise ConfigurationError(
            f"{what} {shown(value)} contains control characters (NUL, newlines, tabs, ...): "
            "a stable name is printable text"
        )
    if not is_utf8(value):
        raise ConfigurationError(f"{what} {shown(value)} contains lone surrogates")
    size = len(value.encode())
    if size > MAX_NAME_BYTES:
        raise ConfigurationError(f"{what} is {size} bytes; the limit is {MAX_NAME_BYTES}")
    return value


def validate_optional_text(value: object, what: str) -> str | None:
    """``validate_text``, ``None`` allowed (``by=None``: the default, the operator's name)."""
    return None if value is None else validate_text(value, what)


#: how deep a JSON value an operator types (a ``--result``, a console form) may nest
MAX_JSON_DEPTH = 100


def parse_json(raw: str, what: str, *, quoted: str = '"PAGE-1"') -> Any:
    """``raw`` (text an operator typed) as strict JSON: no NaN or Infinity, nested at most
    ``MAX_JSON_DEPTH`` deep; else raise ``ConfigurationError`` naming ``what`` and saying
    what is wrong (``quoted``: how a string is written where ``raw`` came from)."""

    def refuse(constant: str) -> None:
        raise ConfigurationError(f"{what} must be strict JSON: {constant} is not a JSON value")

    deep = ConfigurationError(
        f"{what} is nested too deeply (at most {MAX_JSON_DEPTH} levels of arrays and objects)"
    )
    try:
        value = json.loads(raw, parse_constant=refuse)
    except RecursionError:  # deeper than the parser's stack
        raise deep from None
    except ValueError as exc:
        if isinstance(exc, ConfigurationError):
            raise
        raise ConfigurationError(
            f"{what} must be JSON ({exc}); for a string, quote it: {quoted}"
        ) from None
    if _depth(value) > MAX_JSON_DEPTH:
        raise deep
    return value


def _depth(value: Any) -> int:
    """How deep ``value`` nests (iteratively: a deep value cannot exhaust the stack)."""
    deepest = 0
    todo: list[tuple[Any, int]] = [(value, 1)]
    while todo:
        v, d = todo.pop()
        if isinstance(v, dict):
            v = list(v.values())
        if isinstance(v, list):
            deepest = max(deepest, d)
            if d > MAX_JSON_DEPTH:
                return d
            todo.extend((x, d + 1) for x in v)
    return deepest
