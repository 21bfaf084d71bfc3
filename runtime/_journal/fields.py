"""Typed reads of the fields of a decoded JSON object (an entry's payload): a field of the
wrong type, or a required one that is missing, raises :class:`FieldError` saying which.

And :class:`Value`, the base of the runtime's internal value classes written without attrs:
a class with ``__slots__`` and its own ``__init__``, its equality and repr from its fields.
attrs builds a class when its module is imported, compiling the source of the methods it
generates: about 4 M instructions for a frozen class of eight fields, against 0.1 M for the
same class written out (its bytecode is read from the module's cache). Internal classes made
often and never shown to users (recovery's plan) are written out (issue 28: ``import
actorlog`` is a large part of a resumed process's start); public classes stay attrs classes.
A subclass declares its fields (annotations, in order: its ``__match_args__``), lists them
in ``__slots__`` and sets each in ``__init__``. Equality is field by field, in order, between
instances of the same class (as attrs'); a ``Value`` is unhashable, a :class:`FrozenValue`
(set with ``object.__setattr__``) hashes its fields."""

from __future__ import annotations

import inspect
import json
import reprlib
from typing import Any, ClassVar

from attrs.exceptions import FrozenInstanceError

__all__ = ["REQUIRED", "FieldError", "Fields", "FrozenValue", "Value", "as_object"]


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


class Value:
    """Equality and repr from the fields a subclass declares (and lists in ``__slots__``)."""

    __slots__ = ()
    __match_args__: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # the fields in the order they are declared (``__slots__`` is kept sorted)
        names = tuple(
            name
            for name, kind in inspect.get_annotations(cls).items()
            if not str(kind).startswith(("ClassVar", "typing.ClassVar"))
        )
        if set(names) != set(cls.__slots__):
            raise TypeError(f"{cls.__qualname__}: __slots__ is not its declared fields")
        cls.__match_args__ = names  # type: ignore[misc]  # set once, here

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self.__match_args__)

    __hash__: ClassVar[None] = None  # type: ignore[assignment]  # mutable: unhashable, as attrs'

    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__match_args__)
        return f"{type(self).__qualname__}({fields})"


class FrozenValue(Value):
    """A :class:`Value` whose fields cannot be set once made (``FrozenInstanceError``, an
    ``AttributeError``, as attrs' frozen classes raise), hashed by its fields."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError()

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError()

    def __hash__(self) -> int:  # type: ignore[override]  # frozen: hashable by its fields
        return hash((type(self), *[getattr(self, name) for name in self.__match_args__]))
