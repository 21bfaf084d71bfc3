"""The classes a user declares: their stable names (type tags), aliases, and the texts of
the errors a newcomer meets first about them.

A class's tag is what the log records for it ([F8]): a message entry's type tag, an actor's
class in the store, a state snapshot's tag. It is the class's declared ``name=`` if it has
one (``class Researcher(Actor[Notes], name="researcher")``, ``@actorlog.message(name=...)``),
else ``__actorlog_tag__`` if set, else ``module.QualName``. ``aliases=[...]`` are the tags
the class answered to before: logs and actors recorded under them still read.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import warnings
import weakref
from collections.abc import Callable, Iterable
from typing import Any, TypeVar, overload

import attrs

from .checks import shown, validate_stable_name
from .errors import ConfigurationError, UnstableNameWarning

__all__ = [
    "answers_to",
    "class_mismatch",
    "declare",
    "find_class",
    "is_pydantic_model",
    "learn",
    "message",
    "message_kind",
    "new_state",
    "check_actor_class",
    "not_an_actor",
    "replay_tag",
    "tags",
    "type_tag",
    "unknown_message",
]

T = TypeVar("T", bound=type)

_MAIN = "__main__."
#: declared names -> the class that declared them (messages decoded by name alone)
_DECLARED: weakref.WeakValueDictionary[str, type] = weakref.WeakValueDictionary()
#: classes already warned about: one warning per class, not one per message
_WARNED: weakref.WeakSet[type] = weakref.WeakSet()


#: tags already worked out, per class (every post and step asks, several times); a plain
#: dict: a weak one builds a weak reference per lookup, and classes live as long as programs
_TAGS: dict[type, str] = {}
#: message kinds already worked out, per class (every post asks)
_KINDS: dict[type, str | None] = {}


def type_tag(cls: type) -> str:
    """[F8] A class's stable tag: its declared ``name=``, else ``__actorlog_tag__``, else
    ``module.QualName``. Warns (``UnstableNameWarning``, once per class) when the tag
    starts with ``__main__.``: it changes when the file is imported instead of run."""
    try:
        return _TAGS[cls]
    except KeyError:
        pass
    tag = _TAGS[cls] = _work_out_tag(cls)
    return tag


def _work_out_tag(cls: type) -> str:
    # the class's own dict: a subclass of a named class is not that class
    name = cls.__dict__.get("__actorlog_name__")
    if isinstance(name, str):
        return name
    tag = getattr(cls, "__actorlog_tag__", None)
    if not isinstance(tag, str):
        tag = f"{cls.__module__}.{cls.__qualname__}"
    if tag.startswith(_MAIN):
        _warn_unstable(cls, tag)
    return tag


def aliases(cls: type) -> tuple[str, ...]:
    """The tags ``cls`` answered to before (declared with ``aliases=``)."""
    found = cls.__dict__.get("__actorlog_aliases__", ())
    return found if isinstance(found, tuple) else ()


def tags(cls: type) -> tuple[str, ...]:
    """The class's tag, then its aliases."""
    return (type_tag(cls), *aliases(cls))


def answers_to(cls: type, tag: str) -> bool:
    """``tag`` is ``cls``'s tag or one of its aliases."""
    return tag == type_tag(cls) or tag in aliases(cls)


def replay_tag(cls: type, recorded: Any, key: str) -> str:
    """The tag to compare with a recorded effect's ``value[key]`` (``ctx.send``'s message
    type, ``ctx.spawn``'s actor type): the recorded one when it is an alias of ``cls``, so
    a step recorded before a rename replays; else the class's tag."""
    record = getattr(recorded, "record", None)  # a Recorded effect: its EffectRecord
    value = getattr(record, "value", None)
    old = value.get(key) if isinstance(value, dict) else None
    if isinstance(old, str) and old in aliases(cls):
        return old
    return type_tag(cls)


def learn(known: dict[str, Any], cls: type, *, replace: bool = False) -> None:
    """Enter ``cls`` in a tag -> class table under its tag and its aliases. The tag
    replaces an earlier entry with ``replace`` (so do aliases held by an earlier class of the
    same tag); aliases never replace another class's own tag."""
    tag = type_tag(cls)
    if replace or tag not in known:
        known[tag] = cls
    for alias in aliases(cls):
        if alias not in known or (replace and type_tag(known[alias]) == tag):
            known[alias] = cls  # (an alias of an earlier version of this class is replaced)


def find_class(tag: str) -> type | None:
    """The class a tag names without any registration: a declared name or alias, else
    ``module.QualName`` of an imported module. None if neither."""
    found = _DECLARED.get(tag)
    if found is not None:
        return found
    module, _, qual = tag.rpartition(".")
    mod = sys.modules.get(module)
    obj: Any = mod
    for part in qual.split(".") if mod is not None else ():
        obj = getattr(obj, part, None)
    return obj if isinstance(obj, type) else None


def is_pydantic_model(cls: Any) -> bool:
    """``cls`` is a pydantic model class (pydantic is optional: only if it was imported)."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(cls, type) and issubclass(cls, pydantic.BaseModel)


def message_kind(cls: type) -> str | None:
    """What kind of message class ``cls`` is (``"attrs"``, ``"dataclass"``,
    ``"pydantic"``), or None if it cannot be a message."""
    try:
        return _KINDS[cls]
    except KeyError:
        pass
    kind = _KINDS[cls] = _work_out_kind(cls)
    return kind


def _work_out_kind(cls: type) -> str | None:
    if attrs.has(cls):
        return "attrs"
    if dataclasses.is_dataclass(cls):
        return "dataclass"
    if is_pydantic_model(cls):
        return "pydantic"
    return None


def declare(cls: type, name: str | None, aliases: Iterable[str] | None) -> None:
    """Give ``cls`` a stable name and aliases (``name=`` / ``aliases=`` of an ``Actor``
    subclass or of ``@actorlog.message``). Raises ``ConfigurationError`` for a name that
    cannot be a tag, a ``__main__.`` name, or a name another class already declared."""
    if isinstance(aliases, str | bytes) or not isinstance(aliases, Iterable | None):
        raise ConfigurationError(
            f"{cls.__qualname__}: aliases must be a list of names, not "
            f"{type(aliases).__qualname__} {shown(aliases)}"
        )
    old = tuple(validate_stable_name(a, "an alias") for a in aliases or ())
    if name is not None:
        validate_stable_name(name, "a class name")
        if name.startswith(_MAIN):
            raise ConfigurationError(
                f"{cls.__qualname__}: name {shown(name)} starts with '__main__.', which is what "
                "a stable name avoids; choose a name like 'researcher' (keep the old tag in "
                "aliases=[...])"
            )
    for tag in (name, *old):
        if tag is None:
            continue
        other = _DECLARED.get(tag)
        if other is not None and _qualified(other) != _qualified(cls):
            raise ConfigurationError(
                f"{cls.__qualname__}: the name {shown(tag)} is already declared by "
                f"{_qualified(other)}; each name (and alias) belongs to one class"
            )
    if name is not None:
        cls.__actorlog_name__ = name  # type: ignore[attr-defined]  # read by type_tag
        _DECLARED[name] = cls
        _TAGS.pop(cls, None)
    cls.__actorlog_aliases__ = old  # type: ignore[attr-defined]  # read by aliases()
    for tag in old:
        _DECLARED[tag] = cls


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


@overload
def message(cls: T, /) -> T: ...


@overload
def message(
    *, name: str | None = None, aliases: Iterable[str] | None = None
) -> Callable[[T], T]: ...


def message(
    cls: T | None = None,
    /,
    *,
    name: str | None = None,
    aliases: Iterable[str] | None = None,
) -> T | Callable[[T], T]:
    """Declare a message class's stable name (the tag the log records for it) and the
    names it had before::

        @actorlog.message(name="ask", aliases=["myapp.agents.Ask"])
        @attrs.define
        class Ask:
            question: str

    Works on attrs classes, dataclasses and pydantic models (put it above the class
    decorator). It names an actor's state class the same way (a snapshot records its
    state class's tag): there is one decorator for both. A named message decodes by its
    name even when no ``receive`` annotation or ``ActorSystem(messages=[...])`` mentions
    it. See docs/classes.md, "Names that last".
    """

    def wrap(c: T) -> T:
        if not isinstance(c, type):
            raise ConfigurationError(f"@actorlog.message decorates a class, not {shown(c)}")
        if message_kind(c) is None:
            raise ConfigurationError(
                f"@actorlog.message: {c.__qualname__} is not an attrs class, a dataclass or "
                "a pydantic model; put @attrs.define (or @dataclasses.dataclass) below "
                "@actorlog.message"
            )
        declare(c, name, aliases)
        return c

    if cls is not None:
        return wrap(cls)
    return wrap


def _warn_unstable(cls: type, tag: str) -> None:
    if cls in _WARNED:
        return
    _WARNED.add(cls)
    warnings.warn(
        f"{cls.__qualname__} is recorded in the log as {tag!r} because its file runs as a "
        "script; imported from its module it would be another tag, and the log would no "
        f"longer match it. Give it a stable name: {_fix(cls, tag)}",
        UnstableNameWarning,
        stacklevel=3,
    )


def _fix(cls: type, old: str | None) -> str:
    """The declaration that gives ``cls`` a stable name answering to ``old``."""
    # the name the class declares (and its aliases) if it has one: the fix adds to them
    declared = cls.__dict__.get("__actorlog_name__")
    suggested = declared if isinstance(declared, str) else cls.__name__.lower()
    olds = [a for a in cls.__dict__.get("__actorlog_aliases__", ()) if isinstance(a, str)]
    if old and old not in olds and old != suggested:
        olds.append(old)
    alias = f", aliases={json.dumps(olds, ensure_ascii=False)}" if olds else ""
    if _is_actor(cls):
        return f'class {cls.__name__}(Actor[...], name="{suggested}"{alias})'
    return f'@actorlog.message(name="{suggested}"{alias}) above class {cls.__name__}'


def _is_actor(cls: type) -> bool:
    return any(b.__name__ == "Actor" and b.__module__.startswith("actorlog") for b in cls.__mro__)


def class_mismatch(actor_id: str, recorded: str, cls: type) -> str:
    """The text of "actor X exists with class A, not B", with the fix."""
    tag = type_tag(cls)
    text = f"actor {actor_id!r} exists with class {recorded}, not {tag}."
    if recorded.rpartition(".")[2] == cls.__qualname__.rpartition(".")[2] or recorded.startswith(
        _MAIN
    ):
        text += (
            f" If {cls.__qualname__} is the class it was created with (moved, renamed, or "
            "once run as a script), declare the old tag as an alias: "
            f"{_fix(cls, recorded)}."
        )
    else:
        text += (
            f" Spawn it with the class recorded for it, or use another actor id; if "
            f"{cls.__qualname__} replaces that class, declare it: {_fix(cls, recorded)}."
        )
    return text


def new_state(actor_cls: type, state_type: type) -> Any:
    """The state class called with no arguments, for ``Actor.initial_state``; a class that
    needs arguments is a ``ConfigurationError`` saying what to do."""
    try:
        return state_type()
    except TypeError as exc:
        if "argument" not in str(exc):
            raise
        raise ConfigurationError(
            f"{actor_cls.__qualname__}: cannot make the initial state, "
            f"{state_type.__qualname__}() failed: {exc}. Give every field of "
            f"{state_type.__qualname__} a default (attrs.field(default=...) or "
            f"attrs.Factory(list)), or override {actor_cls.__qualname__}.initial_state() to "
            "return the first state"
        ) from exc


def unknown_message(tag: str) -> str:
    """The text of "unknown message type" (its first words are matched by the step code:
    keep them)."""
    return (
        f"unknown message type {tag!r}: no class known to this system has that tag. "
        "Import the module that defines it and register the class with "
        "ActorSystem(messages=[...]) or annotate receive() with it; if the class was "
        f'renamed or moved, declare the old tag: @actorlog.message(aliases=["{tag}"]) on '
        "the new class"
    )


def check_actor_class(cls: object) -> None:
    """Raise ``ConfigurationError`` unless ``cls`` is an ``Actor`` subclass (``cls=`` of
    spawn, ref, register, read_state, ctx.spawn), before anything is stored."""
    if not (isinstance(cls, type) and _is_actor(cls)):
        raise ConfigurationError(not_an_actor(cls))


def not_an_actor(obj: object) -> str:
    """The text of "X is not an Actor subclass", with what was likely meant."""
    text = f"{shown(obj)} is not an Actor subclass"
    if not isinstance(obj, type) and _is_actor(type(obj)):
        return f"{text}: pass the class itself ({type(obj).__qualname__}), not an instance"
    return (
        f"{text}: actors are classes declared as "
        "class Researcher(Actor[StateClass]) with an async receive(self, ctx, msg)"
    )
