"""Replay compares a call's arguments with its recorded intent (``_same``): equal as they
are first, then after a JSON round trip, then as sets (issue 28: the first comparison spares
replay the round trip of every recorded call). The shortcut must never accept what the round
trip rejects, nor the reverse: checked against the full comparison over generated values,
both for the recorded value itself and for a value that differs from it."""

from __future__ import annotations

import json
from typing import Any

import hypothesis
import hypothesis.strategies as st
from actorlog._effects.context import _same
from actorlog._journal import codec as _codec

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=5)
)
#: what ``to_plain`` gives a handler's arguments: JSON values, tuples, int keys
_PLAIN = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=3) | st.integers(-3, 3), inner, max_size=3)
    ),
    max_leaves=8,
)


def _full(got: Any, recorded: Any) -> bool:
    """The comparison without the shortcut."""
    return json.loads(json.dumps(got)) == recorded or _codec.same_plain(got, recorded)


def _recorded(value: Any) -> Any:
    return json.loads(json.dumps(value))


@hypothesis.given(got=_PLAIN, other=_PLAIN)
@hypothesis.settings(max_examples=300, deadline=None)
def test_same_agrees_with_the_full_comparison(got: Any, other: Any) -> None:
    for recorded in (_recorded(got), _recorded(other), _recorded([got]), _recorded({"k": got})):
        assert _same(got, recorded) is _full(got, recorded), (got, recorded)


def test_same_tells_the_shapes_apart() -> None:
    assert _same((1, 2), [1, 2]) and _same({1: "a"}, {"1": "a"}) and _same(1, 1.0)
    assert not _same([1, 2], [2, 1]) and not _same({"a": 1}, {"a": 2})
    assert not _same([1], [1, 1]) and not _same("1", 1) and not _same(None, 0)
    assert not _same(float("nan"), float("nan"))  # NaN never equals, recorded or not
