"""A warm conversation's history kept as pydantic-ai objects between its runs (issue 25).

A ``DurableAgent`` run starts from its actor's state, the conversation as JSON, and ends by
dumping the whole conversation back into the state. Both grow with the conversation: at 84
messages, validating the history and dumping it again cost 7 to 11 ms of CPU per run, for
messages no run changed. ``WarmHistories`` keeps, per conversation (actor id), the objects
the last run ended with, next to the very list the state holds (its JSON dump of them):

* a run whose state's ``messages`` is that list (the same object, holding the same items:
  the state this process made at the end of that run, not one recovered from the log, a
  snapshot or another system) starts from the kept objects instead of validating the JSON;
* at the run's end, each message of the conversation that is a kept object, unchanged,
  reuses its JSON from the state instead of being dumped again.

"Unchanged" is checked, not assumed: each kept message's fields, its parts' fields, and one
level inside them (the items of a list or dict field, the fields of a dataclass field such
as a response's ``usage``) must be the very objects they were when the message was dumped.
pydantic-ai replaces a field or a part when it changes an earlier message (instructions,
parts merged into a request, run ids), and the check sees that. What it does not see is an
edit deeper inside a field (a string is immutable; a dict inside a tool call's arguments is
not): the rule is that code run by the agent (tools, history processors, event stream
handlers) does not edit history messages' nested values in place, which pydantic-ai does
not do either. A run that fails drops its conversation's entry, so the next run validates
the state's JSON again.
"""

from __future__ import annotations

import dataclasses
import operator
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

__all__ = ["RunHistory", "WarmHistories"]

#: type -> a function giving the tuple of an instance's dataclass fields (None: not a
#: dataclass)
_GETTERS: dict[type, Callable[[Any], tuple[Any, ...]] | None] = {}


def _getter(kind: type) -> Callable[[Any], tuple[Any, ...]] | None:
    try:
        return _GETTERS[kind]
    except KeyError:
        pass
    found: Callable[[Any], tuple[Any, ...]] | None = None
    if dataclasses.is_dataclass(kind):
        names = [f.name for f in dataclasses.fields(kind)]
        get = operator.attrgetter(*names)
        found = (lambda o: (get(o),)) if len(names) == 1 else get
    if len(_GETTERS) < 4096:
        _GETTERS[kind] = found
    return found


#: field values with nothing inside to compare
_PLAIN = frozenset({str, int, float, bool, type(None), datetime})


def _inside(values: tuple[Any, ...], out: list[Any]) -> None:
    """``values`` and, one level down, the items of lists, tuples and dicts (keys and
    values) and the fields of dataclasses among them, appended to ``out`` (a length before
    each container's items)."""
    out.extend(values)
    if _PLAIN.issuperset(map(type, values)):
        return  # (most parts: no loop in Python)
    for v in values:
        kind = type(v)
        if kind in _PLAIN:
            continue
        if kind is list or kind is tuple:
            out.append(len(v))
            out.extend(v)
        elif kind is dict:
            out.append(len(v))
            out.extend(v)
            out.extend(v.values())
        elif (get := _getter(kind)) is not None:
            out.extend(get(v))


def signature(message: Any) -> list[Any]:
    """The objects a message's state is made of, down to its parts' fields and one level
    inside them (see the module's docstring): if each is the same object later, the message
    dumps as it did."""
    get = _getter(type(message))
    if get is None:
        return [message]
    out: list[Any] = []
    _inside(get(message), out)
    for part in getattr(message, "parts", ()):
        pget = _getter(type(part))
        if pget is None:
            out.append(part)
        else:
            _inside(pget(part), out)
    return out


def _same(before: Sequence[Any], now: Sequence[Any]) -> bool:
    """Is each object of ``now`` the one at its place in ``before``?"""
    return len(before) == len(now) and all(map(operator.is_, before, now))


class _Warm:
    __slots__ = ("items", "messages", "plain", "signatures")

    def __init__(self, plain: list[Any], messages: list[ModelMessage], sigs: list[Any]) -> None:
        #: the state's list (the JSON of each message, as ``messages`` dumped), and its items
        #: then (an item replaced in the list since is seen)
        self.plain = plain
        self.items = tuple(plain)
        self.messages = messages
        self.signatures = sigs


class RunHistory:
    """What one run starts from (``WarmHistories.take``): its history as objects, the
    conversation's entry it was taken from, and the messages dumped during the run."""

    __slots__ = ("dumped", "messages", "warm")

    def __init__(self, messages: list[ModelMessage], warm: _Warm | None) -> None:
        self.messages = messages
        self.warm = warm
        #: id -> (message, its signature, its JSON) of each message ``dump`` dumped
        self.dumped: dict[int, tuple[ModelMessage, list[Any], Any]] = {}

    def dump(self, messages: Sequence[ModelMessage]) -> list[Any]:
        """``messages`` dumped as ``ModelMessagesTypeAdapter`` dumps them (the request
        fingerprints' dumps: ``RequestChain``), kept for the conversation's JSON at the
        run's end."""
        plain = list(ModelMessagesTypeAdapter.dump_python(list(messages), mode="json"))
        for m, p in zip(messages, plain, strict=True):
            self.dumped[id(m)] = (m, signature(m), p)
        return plain


class WarmHistories:
    """Per conversation (actor id), the objects its last run ended with (at most ``limit``
    conversations, the least recently run dropped first). See the module's docstring."""

    def __init__(self, limit: int = 128) -> None:
        self._limit = limit
        self._warm: OrderedDict[str, _Warm] = OrderedDict()

    def take(self, actor_id: str, plain: list[Any]) -> RunHistory:
        """The history a run starts from, for the state's ``plain`` conversation: the kept
        objects if ``plain`` is the list kept with them and none of them changed, else
        ``plain`` validated. The conversation's entry is taken out: a run that fails leaves
        none (its objects may be half-changed), and the next run validates the state's
        JSON."""
        warm = self._warm.pop(actor_id, None)
        if warm is not None and warm.plain is plain and _same(warm.items, plain):
            messages = warm.messages
            if all(map(_same, warm.signatures, map(signature, messages))):
                return RunHistory(list(messages), warm)
        return RunHistory(ModelMessagesTypeAdapter.validate_python(plain) if plain else [], None)

    def put(self, actor_id: str, messages: Sequence[ModelMessage], run: RunHistory) -> list[Any]:
        """The conversation ``messages`` a run ended with, as JSON (the state's new
        ``messages``): each message kept from the run before (``run.warm``) or dumped during
        the run (``run.dump``) and unchanged since keeps that JSON, the others are dumped.
        Kept for the conversation's next run."""
        warm = run.warm
        messages = list(messages)
        sigs = [signature(m) for m in messages]
        plain: list[Any] = [None] * len(messages)
        fresh: list[int] = []
        dumped = run.dumped
        for i, m in enumerate(messages):
            if (
                warm is not None
                and i < len(warm.messages)
                and warm.messages[i] is m
                and _same(warm.signatures[i], sigs[i])
            ):
                plain[i] = warm.plain[i]
            elif (d := dumped.get(id(m))) is not None and d[0] is m and _same(d[1], sigs[i]):
                plain[i] = d[2]
            else:
                fresh.append(i)
        if fresh:
            new = ModelMessagesTypeAdapter.dump_python([messages[i] for i in fresh], mode="json")
            for i, d in zip(fresh, new, strict=True):
                plain[i] = d
        self._warm[actor_id] = _Warm(plain, messages, sigs)
        while len(self._warm) > self._limit:
            self._warm.popitem(last=False)
        return plain
