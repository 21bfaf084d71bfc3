"""Idempotency keys in assertions: a key holds its actor's random incarnation id
(FORMAT.md [F13]), so a test matches its shape and checks sameness separately."""

from __future__ import annotations

import re


class Key(str):
    """Equal to the key of call ``index`` of the step of message ``seq`` of ``actor_id`` in
    some incarnation: ``"{actor_id}:{16 hex digits}:{seq}:{index}"``. A ``str`` subclass, so
    that ``"..." == Key(...)`` asks this class first (and type checkers accept it)."""

    pattern: re.Pattern[str]

    def __new__(cls, actor_id: str, seq: int, index: int | None) -> Key:
        """``index`` None: any call of that step, by any of its tasks (FORMAT.md [F18]: a
        call of a spawned task ends in ``"{task}.{index}"``)."""
        last = r"[0-9]+(?:\.[0-9]+)*" if index is None else str(index)
        self = super().__new__(cls, f"{actor_id}:<incarnation>:{seq}:{index}")
        self.pattern = re.compile(rf"{re.escape(actor_id)}:[0-9a-f]{{16}}:{seq}:{last}")
        return self

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and self.pattern.fullmatch(str.__str__(other)) is not None

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self.pattern.pattern)

    def __repr__(self) -> str:
        return f"Key(/{self.pattern.pattern}/)"


def incarnation_of(key: str) -> str:
    """The incarnation id in a key ``actor:incarnation:seq:index``."""
    return key.rsplit(":", 3)[1]


class EffectId(Key):
    """Equal to the id of effect ``index`` of the step of message ``seq`` (a ``ctx.send``
    message id, a ``send_later`` timer id): ``"{actor_id}/{16 hex}/{seq}/{index}"``, after
    ``prefix`` (``"timer:"`` for the message a timer delivers)."""

    def __new__(cls, actor_id: str, seq: int, index: int, *, prefix: str = "") -> EffectId:
        self = str.__new__(cls, f"{prefix}{actor_id}/<incarnation>/{seq}/{index}")
        self.pattern = re.compile(rf"{re.escape(prefix + actor_id)}/[0-9a-f]{{16}}/{seq}/{index}")
        return self
