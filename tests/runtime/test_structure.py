"""``_codec.structure`` (decoding a message, a state, a tool's result or a reply) and
``_codec.unstructure`` (encoding one) give what the cattrs converter gives, for every kind
of value: their shortcuts for plain values and plain attrs classes change nothing, and
everything else goes to cattrs."""

from __future__ import annotations

import dataclasses
import sys
import typing
from typing import Any, Generic, TypeVar

import attrs
import pytest
from actorlog._journal import codec as _codec

T = TypeVar("T")


@attrs.define
class Plain:
    n: int
    name: str
    ratio: float
    flag: bool


@attrs.frozen(kw_only=True)
class Frozen:
    n: int
    label: str = "x"


@attrs.define
class Private:
    _secret: str
    shown: int = attrs.field(converter=int)


def _upper(text: str) -> str:
    return text.upper()


@attrs.define
class Upper:
    text: str = attrs.field(converter=_upper)


@attrs.define
class Checked:
    n: int = attrs.field(validator=attrs.validators.gt(0))


@attrs.define
class NotInit:
    n: int
    later: int = attrs.field(init=False, default=7)


@attrs.define
class Nested:
    inner: Plain
    tag: str


@attrs.define
class Optional_:
    n: int | None
    text: str


@attrs.define
class Box(Generic[T]):
    value: T


@dataclasses.dataclass
class Data:
    n: int
    name: str


PLAIN = {"n": 1, "name": "a", "ratio": 0.5, "flag": True}

CASES: list[tuple[Any, Any]] = [
    ("text", str),
    (3, int),
    (2.5, float),
    (False, bool),
    (True, int),  # a bool given for an int: converted
    (5, float),  # an int for a float: converted
    ("7", int),
    (None, str),
    (PLAIN, Plain),
    ({**PLAIN, "extra": [1, 2]}, Plain),  # an extra key: ignored
    ({**PLAIN, "n": True}, Plain),  # converted
    ({**PLAIN, "ratio": 2}, Plain),  # converted
    ({"n": 1, "name": "a", "ratio": 0.5}, Plain),  # missing: an error
    ({"n": 4}, Frozen),  # a default
    ({"n": 4, "label": "y"}, Frozen),
    ({"secret": "s", "shown": 3}, Private),
    ({"secret": "s", "shown": "3"}, Private),
    ({"text": "abc"}, Upper),
    ({"n": 5}, Checked),
    ({"n": -5}, Checked),  # the validator's error
    ({"n": 1, "later": 9}, NotInit),
    ({"inner": PLAIN, "tag": "t"}, Nested),
    ({"n": None, "text": "t"}, Optional_),
    ({"n": 2, "text": "t"}, Optional_),
    ({"value": 3}, Box[int]),
    ({"value": 3}, Box),
    ({"n": 1, "name": "d"}, Data),
    ([1, 2], list[int]),
    ({"a": 1}, dict[str, int]),
    (["a", "b"], list[str]),
    ([], list[str]),
    ([1, True], list[int]),  # a bool given for an int: converted
    ([1, 2], list[float]),  # converted
    ([1, "2"], list[int]),
    ([1, None], list[int]),  # an error
    (["a"], typing.List[str]),  # noqa: UP006 (the typing alias is structured alike)
    ({"a": "x", "b": "y"}, dict[str, str]),
    ({"a": 1.5}, dict[str, float]),
    ({"a": 1}, dict[str, float]),  # converted
    ({"a": 1}, dict[str, str]),  # converted
    ({}, dict[str, bool]),
    (["a"], dict[str, str]),  # a list for a dict: cattrs' answer
    ({"a": 1}, list[str]),  # a dict for a list: cattrs' answer
    ("not a dict", Plain),
]


def _outcome(fn: Any, plain: Any, cls: Any) -> tuple[str, Any]:
    try:
        value = fn(plain, cls)
    except Exception as exc:
        return "error", type(exc)
    return type(value).__qualname__, value


@pytest.mark.parametrize(("plain", "cls"), CASES)
def test_structure_is_the_converters(plain: Any, cls: Any) -> None:
    expected = _outcome(_codec.converter.structure, plain, cls)
    assert _outcome(_codec.structure, plain, cls) == expected
    assert _outcome(_codec.structure, plain, cls) == expected  # again (cached fields)


def test_a_plain_list_or_dict_comes_back_as_a_new_container() -> None:
    """As cattrs makes it: the caller's list or dict is never the logged one."""
    for plain, cls in ((["a"], list[str]), ({"a": 1}, dict[str, int])):
        got = _codec.structure(plain, cls)
        assert got == plain and got is not plain


def test_a_plain_class_with_unresolvable_annotations_goes_to_cattrs() -> None:
    ns: dict[str, Any] = {"attrs": attrs, "__name__": "unresolvable"}
    exec(  # a class whose annotation names nothing
        "from __future__ import annotations\n@attrs.define\nclass Broken:\n    n: Missing\n",
        ns,
    )
    cls = ns["Broken"]
    sys.modules.pop("unresolvable", None)
    assert _outcome(_codec.structure, {"n": 1}, cls) == _outcome(
        _codec.converter.structure, {"n": 1}, cls
    )


UNSTRUCTURE_CASES: list[Any] = [
    "text",
    3,
    2.5,
    True,
    None,
    [],
    [1, "a", 2.5, False, None],
    [[1], 2],
    (1, 2),
    {},
    {"a": 1, "b": None},
    {"a": [1]},
    {1: "a"},
    {"when": 1, "set": {1, 2}},
    Plain(1, "a", 0.5, True),
    Plain("one", "a", 0.5, True),  # type: ignore[arg-type]  # another type than declared
    Plain(True, "a", 1, True),
    [Plain(1, "a", 0.5, True)],
    Frozen(n=1),
    Private("s", 3),
    NotInit(1),
    Upper("a"),
    Nested(Plain(1, "a", 0.5, True), "t"),
    Box(3),
    Data(1, "x"),
]


@pytest.mark.parametrize("value", UNSTRUCTURE_CASES)
def test_unstructure_is_the_converters(value: Any) -> None:
    expected = _codec.converter.unstructure(value)
    got = _codec.unstructure(value)
    assert (type(got), got) == (type(expected), expected)
    if isinstance(value, list | dict):
        assert got is not value  # a new container, as cattrs makes
