"""``codec.unstructure`` copies nested plain JSON (a conversation's messages in a reply) itself
instead of through cattrs: the result must be what cattrs makes of the same value, item for item
and type for type, whatever is nested inside (a tuple, a set, an enum, a str subclass, an attrs
instance, a non-str key all go to cattrs)."""

from __future__ import annotations

import enum
import json
from typing import Any

import attrs
import pytest
from actorlog._journal import codec
from actorlog.errors import EncodeError
from hypothesis import given, settings, strategies as st


class _Color(enum.IntEnum):
    RED = 1


class _Text(str):
    pass


@attrs.frozen
class _Point:
    x: int


_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(),
)
_odd = st.one_of(
    st.just(_Color.RED),
    st.builds(_Text, st.text()),
    st.builds(_Point, st.integers()),
    st.tuples(st.integers()),
    st.frozensets(st.integers(), max_size=2),
)


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if type(a) in (list, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is float:
        return repr(a) == repr(b)
    return bool(a == b)


def _json(leaves: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        leaves,
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
        ),
        max_leaves=20,
    ).filter(lambda v: type(v) in (dict, list))


@given(_json(_leaves))
def test_nested_plain_json_is_copied_as_cattrs_copies_it(value: Any) -> None:
    ours = codec.unstructure(value)
    assert _same(ours, codec._converter().unstructure(value))
    assert ours is not value  # a new container: the caller's value is never aliased


@given(_json(_leaves | _odd))
def test_anything_else_nested_is_left_to_cattrs(value: Any) -> None:
    assert _same(codec.unstructure(value), codec._converter().unstructure(value))


def test_a_non_str_key_deep_inside_goes_to_cattrs() -> None:
    value = {"messages": [{"parts": [{1: "a"}]}]}
    assert _same(codec.unstructure(value), codec._converter().unstructure(value))


def test_deep_nesting_past_the_copy_limit_goes_to_cattrs() -> None:
    value: Any = []
    for _ in range(80):
        value = [value]
    assert _same(codec.unstructure(value), codec._converter().unstructure(value))


_odder = _odd | st.one_of(
    st.datetimes(),
    st.sets(st.integers(), max_size=3),
    st.dictionaries(st.integers() | st.just(_Color.RED), st.integers(), max_size=3),
    st.builds(_Text, st.text()).map(lambda t: {t: t}),
    st.floats(),  # NaN and infinities: refused either way
)


@settings(max_examples=400)
@given(_json(_leaves | _odder))
def test_to_plain_for_an_encoding_caller_equals_unstructure_without_the_copy(value: Any) -> None:
    """``to_plain(..., check=False)`` (a caller that encodes the result at once into an
    entry and keeps nothing of it: a reply, a tool's result) hands a dict or a list back as
    it is; the entry's bytes (``encode_plain``, which unstructures what is not plain JSON)
    are those of the copy ``unstructure`` makes, whatever is nested inside."""
    ours = codec.to_plain(value, "reply", check=False)
    assert ours is value
    expected = codec.unstructure(value)
    try:
        want = codec.encode_plain([7, expected, None], "reply")
    except EncodeError:
        with pytest.raises(EncodeError):
            codec.encode_plain([7, ours, None], "reply")
        return
    assert codec.encode_plain([7, ours, None], "reply") == want


def test_to_plain_with_the_check_still_copies() -> None:
    value = {"messages": [{"parts": [{"text": "a"}]}]}
    assert codec.to_plain(value, "reply") is not value
    assert codec.to_plain(value, "reply", check=False) is value


@given(_json(_leaves | _odd))
def test_encode_json_of_plain_json_encodes_the_value_itself_as_before(value: Any) -> None:
    """``encode_json`` (snapshots, exports) and ``ctx.emit``'s events encode plain JSON
    without copying it first: the bytes are those of the copy."""
    try:
        want = json.dumps(
            codec.unstructure(value), separators=(",", ":"), ensure_ascii=False, allow_nan=False
        ).encode()
    except (TypeError, ValueError):
        return
    assert codec.encode_json(value, "state") == want
    assert codec.unstructure_to_encode(value) is value or not codec._is_json(value, 0)
