"""Typed reads of the fields of a decoded JSON object (an entry's payload): a field of the
wrong type, or a required one that is missing, raises :class:`FieldError` saying which."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["REQUIRED", "FieldError", "Fields", "as_object"]


class FieldError(ValueError):
    """A payload field of the wrong type (the text says which)."""


def as_object(obj: object, what: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise FieldError(f"{what} is not a JSON object")
    return obj


class Fields:
    """Typed reads of one payload object; a wrong type raises ``FieldError``."""

    def __init__(self, p: dict[str, Any]) -> None:
        self.p = p

    def value(self, name: str) -> Any:
        return self.p.get(name)

    def _get(self, name: str, types: type | tuple[type, ...], what: str, default: Any) -> Any:
        v = self.p.get(name, _ABSENT)
        if v is _ABSENT:
            if default is REQUIRED:
                raise FieldError(f"field {name!r} is missing")
            return default
        t = type(v)
        if t is types or (type(types) is tuple and t in types):
            return v  # exactly a wanted type (JSON decodes to exact types): the common case
        if not isinstance(v, types) or (isinstance(v, bool) and bool not in _tuple(types)):
            raise FieldError(f"field {name!r} is not {what}: {_short(v)}")
        return v

    def integer(self, name: str, default: Any = None) -> int:
        return int(self._get(name, int, "an integer", default))

    def boolean(self, name: str, default: Any = None) -> bool:
        return bool(self._get(name, bool, "true or false", default))

    def text(self, name: str, default: Any = None) -> str:
        return str(self._get(name, str, "a string", default))

    def task_path(self) -> str:
        """[F18] ``task``: absent (the root task, "") or a dot-joined path of numbers."""
        task = self.text("task", "")
        if task and not all(part.isascii() and part.isdigit() for part in task.split(".")):
            raise FieldError(f"task must be a dot-joined path of numbers, not {task[:40]!r}")
        return task

    def opt_text(self, name: str) -> str | None:
        v = self._get(name, (str, type(None)), "a string or null", None)
        return None if v is None else str(v)

    def opt_float(self, name: str) -> float | None:
        v = self._get(name, (int, float, type(None)), "a number or null", None)
        return None if v is None else float(v)

    def items(self, name: str) -> list[Any]:
        return list(self._get(name, list, "a list", []))

    def mapping(self, name: str) -> dict[str, Any]:
        return dict(self._get(name, dict, "an object", {}))

    def opt_strings(self, name: str) -> dict[str, str] | None:
        """An object of strings (a trace context, a span), or null."""
        v = self._get(name, (dict, type(None)), "an object or null", None)
        if v is not None and not all(isinstance(x, str) for x in v.values()):
            raise FieldError(f"field {name!r} is not an object of strings: {_short(v)}")
        return None if v is None else dict(v)


REQUIRED: Any = object()
_ABSENT: Any = object()


def _tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _short(v: object) -> str:
    text = json.dumps(v, default=repr)
    return text if len(text) <= 60 else text[:57] + "..."
