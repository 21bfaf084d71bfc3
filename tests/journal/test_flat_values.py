"""``codec.is_flat``: the plain values the step path hands on as they are instead of decoding
them from the bytes just logged (a small message's body). Live equals replay only if such
a value decodes from its JSON to an equal value of the same types, item for item."""

from __future__ import annotations

import enum
from typing import Any

from actorlog._journal.codec import decode_json, encode_plain, is_flat
from hypothesis import given, strategies as st

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**200), max_value=2**200),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
)


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if type(a) is list:
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is float:
        return repr(a) == repr(b)  # -0.0 stays -0.0
    return bool(a == b)


@given(st.dictionaries(st.text(), _scalars) | st.lists(_scalars) | _scalars)
def test_a_flat_value_decodes_from_its_json_to_itself(value: Any) -> None:
    assert is_flat(value)
    try:
        data = encode_plain([value], "x")  # as in an entry's compact array
    except Exception:
        return  # not encodable (a lone surrogate): refused before anything uses it
    assert _same(decode_json(data)[0], value)


class _Color(enum.IntEnum):
    RED = 1


class _Text(str):
    pass


def test_values_that_do_not_decode_to_themselves_are_not_flat() -> None:
    assert not is_flat({"a": [1]})  # nested
    assert not is_flat({"a": {"b": 1}})
    assert not is_flat({1: "a"})  # a key that JSON turns into a str
    assert not is_flat({"a": (1, 2)})  # a tuple decodes as a list
    assert not is_flat({"a": _Color.RED})  # decodes as an int
    assert not is_flat({"a": _Text("x")})  # decodes as a str
    assert not is_flat([[1]])
    assert not is_flat((1, 2))
