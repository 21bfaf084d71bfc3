"""Checks of argument values shared by the runtime, the operator API and the stores: each
kind of value has one validator, and every error message shows the value bounded
(:func:`shown`). A leaf module (``actorlog.store`` re-exports what a store needs)."""

from __future__ import annotations

import math
import reprlib

from ._errors import ConfigurationError

__all__ = [
    "is_utf8",
    "shown",
    "validate_int",
    "validate_name",
    "validate_optional_text",
    "validate_seconds",
    "validate_text",
]

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


def validate_optional_text(value: object, what: str) -> str | None:
    """``validate_text``, ``None`` allowed (``by=None``: the default, the operator's name)."""
    return None if value is None else validate_text(value, what)
