"""Classes for the set-order tests (``test_set_order.py``; the worker is ``set_worker.py``).

``python -m tests.runtime.set_worker encode``: reads one ``repr`` per line on stdin and
prints, per line, the hex of the value's message encoding and of its tool-argument encoding
(or ``E`` and the error type): the parent runs it under several ``PYTHONHASHSEED`` values.

``python -m tests.runtime.set_worker run DB``: a runtime on DB whose actor ``counter`` calls
a tool with a set of words (and a frozenset inside an attrs value); prints ``DONE`` after the
step and then blocks (the parent SIGKILLs it, so no snapshot covers the step).
``python -m tests.runtime.set_worker again DB``: asks ``counter`` again (recovery replays
the first step) and prints ``OK <count> <status>`` or the error.
"""

from __future__ import annotations

import datetime
from typing import Any

import attrs
import pydantic
from actorlog import Actor, Context, tool


@attrs.frozen
class Tag:
    name: str
    n: int


@attrs.frozen
class Box:
    """A field typed ``Any``: cattrs unstructures it by its runtime type."""

    value: Any


@attrs.frozen
class Typed:
    """Fields typed as sets: cattrs unstructures them through the annotation."""

    names: frozenset[str]
    nums: frozenset[int]
    tags: frozenset[Tag] = frozenset()


class Model(pydantic.BaseModel):
    """A pydantic model: pydantic writes its own JSON form (``model_dump``)."""

    model_config = pydantic.ConfigDict(frozen=True)

    names: set[str]
    nested: frozenset[frozenset[int]] = frozenset()
    by_key: dict[str, frozenset[str]] = {}


NAMESPACE: dict[str, Any] = {
    "Tag": Tag,
    "Box": Box,
    "Typed": Typed,
    "Model": Model,
    "datetime": datetime,
}

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota"]


@attrs.define
class Count:
    words: list[str]


@attrs.define
class Total:
    n: int = 0


@tool(effect="read", name="count_words")
async def count_words(words: set[str], tagged: Typed) -> int:
    return len(words) + len(tagged.names)


class Counter(Actor[Total], name="set-counter"):
    snapshot_every = None

    def initial_state(self) -> Total:
        return Total()

    async def receive(self, ctx: Context, msg: Count) -> int:
        words = set(msg.words)
        typed = Typed(frozenset(msg.words), frozenset(range(len(msg.words))))
        self.state.n += await ctx.call(count_words, words, typed)
        return self.state.n
