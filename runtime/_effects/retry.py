"""``Retry``: how often, and how long apart, ``ctx.call`` runs a tool that failed.

Modelled on Temporal's ``RetryPolicy`` (initial interval, backoff coefficient, maximum
interval, maximum attempts) and DBOS's step ``max_attempts`` / ``backoff_rate``; the
spelling follows stamina (``attempts``, ``on``). See docs/retries.md for what differs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .._journal.checks import shown
from .._journal.errors import ConfigurationError

__all__ = ["NO_RETRY", "Retry", "check_timeout"]


def _number(name: str, value: object, *, minimum: float, strict: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(f"Retry({name}=...) must be a number, not {shown(value)}")
    v = _float(value)
    if math.isnan(v) or math.isinf(v) or v < minimum or (strict and v == minimum):
        bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
        raise ConfigurationError(f"Retry({name}={shown(value)}): it must be finite and {bound}")
    return v


def _float(value: int | float) -> float:
    """``float(value)``; an int too large for a float reads as infinite (then refused)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf


_ON = (
    "Retry(on=...) takes an exception class (on=ConnectionError) or a non-empty tuple of "
    "exception classes (on=(TimeoutError, ConnectionError)), not {}"
)


def _exception_classes(on: object) -> tuple[type[BaseException], ...]:
    """``on=`` as a tuple of exception classes. Raises ``ConfigurationError``."""
    if isinstance(on, type):
        classes: tuple[object, ...] = (on,)
    elif isinstance(on, BaseException):
        raise ConfigurationError(
            _ON.format(shown(on)) + f": pass the class, on={type(on).__qualname__}, not an instance"
        )
    elif isinstance(on, str | bytes) or not isinstance(on, Iterable):
        raise ConfigurationError(_ON.format(shown(on)))
    else:
        classes = tuple(on)
    if not classes or not all(
        isinstance(c, type) and issubclass(c, BaseException) for c in classes
    ):
        raise ConfigurationError(_ON.format(shown(on)))
    return classes  # type: ignore[return-value]  # checked just above


class Retry:
    """A retry policy for a tool: ``@tool(retry=Retry(...))`` or, per call,
    ``ctx.call(t.with_options(retry=Retry(...)), ...)``.

    Args:
        attempts: the most attempts in all, the first one included (``1``: no retry).
        initial: the delay (seconds) before the second attempt.
        factor: each further delay is the previous one times ``factor`` (``1.0``: constant).
        max_delay: no delay is longer than this (seconds); ``None``: no cap.
        jitter: pick each delay uniformly at random in [delay/2, delay] (the chosen delay is
            logged, so replay and recovery never draw it again).
        on: the exception classes that are retried (``isinstance``); anything else fails the
            call at once. Default: every ``Exception``. A timed-out attempt raises
            :class:`ToolTimeoutError`, a ``TimeoutError``.
    """

    __slots__ = ("attempts", "factor", "initial", "jitter", "max_delay", "on")

    def __init__(
        self,
        attempts: int = 3,
        *,
        initial: float = 1.0,
        factor: float = 2.0,
        max_delay: float | None = 60.0,
        jitter: bool = True,
        on: type[BaseException] | Iterable[type[BaseException]] = (Exception,),
    ) -> None:
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise ConfigurationError(
                f"Retry(attempts={shown(attempts)}): the number of attempts in all, an int >= 1"
            )
        self.attempts = attempts
        self.initial = _number("initial", initial, minimum=0.0)
        self.factor = _number("factor", factor, minimum=1.0)
        self.max_delay = None if max_delay is None else _number("max_delay", max_delay, minimum=0)
        if not isinstance(jitter, bool):
            raise ConfigurationError(f"Retry(jitter={shown(jitter)}) must be True or False")
        self.jitter = jitter
        self.on: tuple[type[BaseException], ...] = _exception_classes(on)

    def retries(self, exc: BaseException) -> bool:
        """Is ``exc`` one this policy retries?"""
        return isinstance(exc, self.on)

    def delay(self, attempt: int) -> float:
        """The delay (seconds) after failed attempt number ``attempt`` (1 for the first)."""
        try:
            d = self.initial * self.factor ** (attempt - 1)
        except OverflowError:
            d = math.inf
        if self.max_delay is not None:
            d = min(d, self.max_delay)
        if math.isinf(d):
            d = 1e9  # a factor > 1 without a cap: long, but a number that can be logged
        if self.jitter:
            import random  # here: most runs never retry

            d = random.uniform(d / 2, d)
        return d

    def describe(self) -> dict[str, Any]:
        """The policy as plain values (span attributes, docs)."""
        return {
            "attempts": self.attempts,
            "initial": self.initial,
            "factor": self.factor,
            "max_delay": self.max_delay,
            "jitter": self.jitter,
            "on": [c.__qualname__ for c in self.on],
        }

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Retry) and self.describe() == other.describe()

    def __hash__(self) -> int:
        return hash(repr(self))

    def __repr__(self) -> str:
        on = ", ".join(c.__qualname__ for c in self.on)
        return (
            f"Retry(attempts={self.attempts}, initial={self.initial:g}, factor={self.factor:g}, "
            f"max_delay={self.max_delay}, jitter={self.jitter}, on=({on},))"
        )


#: One attempt, no retry (the default of a tool).
NO_RETRY = Retry(1, initial=0.0, factor=1.0, max_delay=None, jitter=False)


def check_timeout(timeout: object) -> float | None:
    """A tool's ``timeout=`` (seconds per attempt), checked. Raises ``ConfigurationError``."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise ConfigurationError(
            f"timeout must be a number of seconds or None, not {shown(timeout)}"
        )
    t = _float(timeout)
    if math.isnan(t) or math.isinf(t) or t <= 0:
        raise ConfigurationError(
            f"timeout={shown(timeout)}: it must be a finite number > 0 seconds"
        )
    return t
