"""[F19] Format 2's compact payloads: an entry's payload as a JSON array of its fields in a
fixed order per kind (no keys), times as integers, codes for the effect and policy names,
and the trailing fields that hold their default left out.

The builders of ``_records`` make new payloads in this form directly (``now_ms``,
``trim_result``, the code tables); a payload given as a dict (a record's ``payload()``) is
turned into it by :func:`to_array` when it is encoded (:func:`encode_entry`). Readers turn
an array back into the dict of its fields with :func:`to_object` (a format-1 payload is a
JSON object and is read as it is), so the records' typed reads are the same for both.
"""

from __future__ import annotations

import time
import zlib
from typing import Any

from . import codec as _codec

__all__ = [
    "LAYOUTS",
    "encode_entry",
    "field_at",
    "pack_snapshot",
    "record_args",
    "snapshot_json",
    "to_array",
    "to_object",
]

_MISSING: Any = object()

#: [F19] kind -> its fields, in array order. ``result`` and ``step`` hold ``value`` /
#: ``reply`` at position 1 when ``ok``, else ``error`` there. ``decision`` entries (rare,
#: written by operators) stay JSON objects.
LAYOUTS: dict[str, tuple[str, ...]] = {
    "message": ("body", "at", "incarnation", "sender", "trace"),
    "intent": ("index", "effect", "policy", "args", "key", "at", "kwargs", "task"),
    "result": (
        "ok",
        "value",
        "at",
        "duration",
        "attempt",
        "settled_by",
        "in_doubt",
        "reconciled",
        "reconciled_value",
    ),
    "effect": ("index", "value", "at", "task"),
    "step": ("ok", "reply", "at", "duration", "span"),
}
_KNOWN = {kind: frozenset(names) | {"error"} for kind, names in LAYOUTS.items()}

#: [F19] value codes: the position in the tuple stands for the name (an unknown name is
#: written as its string)
CODES: dict[str, tuple[str, ...]] = {
    "effect": ("read", "write"),
    "policy": ("rerun", "rerun-same-key", "reconcile", "escalate"),
    "settled_by": ("run", "reconcile", "cancelled"),
}
_ENCODE_CODES = {name: {v: i for i, v in enumerate(vs)} for name, vs in CODES.items()}


#: name -> code, by field (``reconcile`` is a policy, 2, and a ``settled_by``, 1)
EFFECT_CODE = _EFFECT = _ENCODE_CODES["effect"]
POLICY_CODE = _POLICY = _ENCODE_CODES["policy"]
SETTLED_CODE = _SETTLED = _ENCODE_CODES["settled_by"]


def _code(table: dict[str, int], v: Any) -> Any:
    return table.get(v, v) if type(v) is str else v


def _ms(v: Any, scale: int = 1000) -> Any:
    """A time in seconds as integer milliseconds (None stays None; not a finite number:
    ``_MISSING``, the payload is written as its object)."""
    t = type(v)
    if t is float or t is int:
        try:
            return round(v * scale)
        except (OverflowError, ValueError):  # inf, nan
            return _MISSING
    return None if v is None else _MISSING


def _us(v: Any) -> Any:
    """A duration in seconds as integer microseconds (as :func:`_ms`)."""
    return _ms(v, 1_000_000)


def _outcome(p: dict[str, Any], second: str) -> Any:
    """What a result or step holds at position 1: ``value``/``reply``, or ``error``."""
    if "error" in p:
        if p.get("ok") is not False or second in p:
            return _MISSING
        return p["error"]
    return p.get(second)


def to_array(kind: str, p: dict[str, Any]) -> list[Any] | None:
    """The compact form of payload ``p`` of an entry of ``kind``, or None when it has none
    (a decision, a key this layout does not know, a time that is not a number): such a
    payload is written as its JSON object, which every reader reads too.

    Trailing fields that hold their default (what a reader takes for an absent field,
    FORMAT.md [F7] rule 5) are left out; every array keeps its first two items."""
    known = _KNOWN.get(kind)
    if known is None or not p.keys() <= known:
        return None
    g = p.get
    a: list[Any]
    if kind == "message":
        a = [g("body"), _ms(g("at")), g("incarnation"), g("sender"), g("trace")]
        while len(a) > 2 and a[-1] is None:
            a.pop()
    elif kind == "intent":
        a = [
            g("index"),
            _code(_EFFECT, g("effect")),
            _code(_POLICY, g("policy")),
            g("args", []),
            g("key"),
            _ms(g("at")),
            g("kwargs", {}),
            g("task", ""),
        ]
        if a[7] == "":
            a.pop()
            if type(a[6]) is dict and not a[6]:
                a.pop()
    elif kind == "result":
        a = [
            g("ok"),
            _outcome(p, "value"),
            _ms(g("at")),
            _us(g("duration")),
            g("attempt", 1),
            _code(_SETTLED, g("settled_by", "run")),
            g("in_doubt", False),
            g("reconciled"),
            g("reconciled_value"),
        ]
        trim_result(a)
    elif kind == "effect":
        a = [g("index"), g("value"), _ms(g("at")), g("task", "")]
        if a[3] == "":
            a.pop()
    else:  # step
        a = [g("ok"), _outcome(p, "reply"), _ms(g("at")), _us(g("duration")), g("span")]
        if a[4] is None:
            a.pop()
    return None if _MISSING in a else a


#: a result's optional fields (positions 4 to 8), as they read when absent
_RESULT_DEFAULTS: tuple[Any, ...] = (1, 0, False, None, None)


def trim_result(a: list[Any]) -> list[Any]:
    """A compact result without its trailing items that hold their default (in place)."""
    while len(a) > 4:
        default = _RESULT_DEFAULTS[len(a) - 5]
        if type(a[-1]) is not type(default) or a[-1] != default:
            break
        a.pop()
    return a


def now_ms() -> int:
    """[F19] ``at`` of a new entry: Unix time in integer milliseconds."""
    return round(time.time() * 1000)


class LayoutError(ValueError):
    """A compact payload that breaks its layout (the text says how)."""


def _bad(name: str, v: Any, what: str = "an integer") -> LayoutError:
    return LayoutError(f"field {name!r} is not {what}: {str(v)[:40]}")


#: kind -> (position of ``at``, of ``duration`` or 0 for none)
_TIMES = {"message": (1, 0), "intent": (5, 0), "result": (2, 3), "effect": (2, 0), "step": (2, 3)}


def to_object(kind: str, arr: list[Any]) -> dict[str, Any]:
    """The payload dict of compact payload ``arr`` of an entry of ``kind``.

    Raises:
        LayoutError: ``kind`` has no compact form, the number of items is not 2 up to the
            number of fields, or a time or code is not of its type.
    """
    names = LAYOUTS.get(kind)
    if names is None:
        raise LayoutError(f"a {kind} payload is a JSON object, not an array")
    n = len(arr)
    if n < 2 or n > len(names):
        raise LayoutError(f"{n} items, a {kind} payload has 2 to {len(names)}")
    p = dict(zip(names, arr, strict=False))
    at, duration = _TIMES[kind]
    if at < n:
        v = arr[at]
        if type(v) is int:
            p["at"] = v / 1000
        elif v is not None:
            raise _bad("at", v)
    if duration and duration < n:
        v = arr[duration]
        if type(v) is int:
            p["duration"] = v / 1_000_000
        elif v is not None:
            raise _bad("duration", v)
    if kind == "intent":
        for i, name in ((1, "effect"), (2, "policy")):
            if i < n and type(arr[i]) is int:
                p[name] = _decode_code(name, arr[i])
    elif kind == "result" or kind == "step":
        if kind == "result" and n > 5 and type(arr[5]) is int:
            p["settled_by"] = _decode_code("settled_by", arr[5])
        if arr[0] is False:
            p["error"] = p.pop(names[1])
    return p


def _decode_code(name: str, v: int) -> str:
    codes = CODES[name]
    if not 0 <= v < len(codes):
        raise LayoutError(f"field {name!r} holds the unknown code {v}")
    return codes[v]


# -- the runtime's own compact payloads, read directly (the common case of decode_entry) ----
#
# ``record_args(kind, a)`` is the fields, in the order of the record class of ``kind``
# (``_records``), that ``cls._parse(Fields(to_object(kind, a)), tag)`` reads from compact
# payload ``a``, without building the dict of its fields, when every item is of the exact
# type the runtime writes; otherwise None, and the general way reads it (and raises the
# same damage as before for a payload that breaks its layout). tests/journal/test_records.py
# holds the two ways equal.

_EFFECTS, _POLICIES, _SETTLERS = CODES["effect"], CODES["policy"], CODES["settled_by"]


def _name(v: Any, names: tuple[str, ...]) -> str | None:
    """A code item as its name (a known code, or a name written as a string), else None."""
    t = type(v)
    if t is int:
        return names[v] if 0 <= v < len(names) else None
    return v if t is str else None


def _strings(v: Any) -> bool:
    """Is ``v`` what ``Fields.opt_strings`` accepts (null, or an object of strings)?"""
    return v is None or (type(v) is dict and all(type(x) is str for x in v.values()))


def _task(a: list[Any], i: int) -> str | None:
    """[F18] item ``i`` as a task path ("" when absent), or None when it is not one."""
    if len(a) <= i:
        return ""
    task = a[i]
    if type(task) is not str or (
        task and not all(part.isascii() and part.isdigit() for part in task.split("."))
    ):
        return None
    return task


def _time(v: Any, scale: int = 1000) -> Any:
    """An ``at`` (ms) or ``duration`` (us) item in seconds, None as None; else ``_MISSING``."""
    if type(v) is int:
        return v / scale
    return None if v is None else _MISSING


def _message(a: list[Any]) -> tuple[Any, ...] | None:
    n = len(a)
    if n < 2 or n > 5:
        return None
    at, inc = _time(a[1]), a[2] if n > 2 else None
    sender, trace = a[3] if n > 3 else None, a[4] if n > 4 else None
    if at is _MISSING or (inc is not None and type(inc) is not str):
        return None
    if (sender is not None and type(sender) is not str) or not _strings(trace):
        return None
    return a[0], sender, None if trace is None else dict(trace), at, inc


def _intent(a: list[Any]) -> tuple[Any, ...] | None:
    n = len(a)
    if n < 2 or n > 8:
        return None
    index, effect = a[0], _name(a[1], _EFFECTS)
    policy = _name(a[2], _POLICIES) if n > 2 else ""
    args, key = a[3] if n > 3 else [], a[4] if n > 4 else ""
    at, kwargs, task = _time(a[5] if n > 5 else None), a[6] if n > 6 else {}, _task(a, 7)
    if type(index) is not int or effect is None or policy is None or task is None:
        return None
    if type(args) is not list or type(key) is not str or type(kwargs) is not dict:
        return None
    return None if at is _MISSING else (index, effect, policy, args, kwargs, key, at, task)


def _result(a: list[Any]) -> tuple[Any, ...] | None:
    n = len(a)
    if n < 2 or n > 9 or a[0] is not True:  # a failed call's error: the general way
        return None
    at = _time(a[2] if n > 2 else None)
    duration = _time(a[3] if n > 3 else None, 1_000_000)
    attempt = a[4] if n > 4 else 1
    settled = _name(a[5], _SETTLERS) if n > 5 else "run"
    in_doubt = a[6] if n > 6 else False
    reconciled = a[7] if n > 7 else None
    if at is _MISSING or duration is _MISSING or type(attempt) is not int or settled is None:
        return None
    if type(in_doubt) is not bool or (reconciled is not None and type(reconciled) is not str):
        return None
    value = a[8] if n > 8 else None
    return True, a[1], None, attempt, duration, settled, at, in_doubt, reconciled, value


def _effect(a: list[Any]) -> tuple[Any, ...] | None:
    n = len(a)
    if n < 2 or n > 4:
        return None
    index, at, task = a[0], _time(a[2] if n > 2 else None), _task(a, 3)
    if type(index) is not int or task is None or at is _MISSING:
        return None
    return index, a[1], at, task


def _step(a: list[Any]) -> tuple[Any, ...] | None:
    n = len(a)
    if n < 2 or n > 5 or a[0] is not True:  # a failed step's error: the general way
        return None
    at = _time(a[2] if n > 2 else None)
    duration = _time(a[3] if n > 3 else None, 1_000_000)
    span = a[4] if n > 4 else None
    if at is _MISSING or duration is _MISSING or not _strings(span):
        return None
    return True, a[1], None, None if span is None else dict(span), duration, at


_READS = {"message": _message, "intent": _intent, "result": _result, "effect": _effect}
_READS["step"] = _step


def record_args(kind: str, arr: list[Any]) -> tuple[Any, ...] | None:
    """The fields of the record of compact payload ``arr`` of an entry of ``kind``, in its
    record class's order, read directly; None when an item is not of the type the runtime
    writes there (or ``kind`` has no compact form): read it with :func:`to_object`."""
    read = _READS.get(kind)
    return None if read is None else read(arr)


def field_at(kind: str, arr: list[Any], name: str) -> Any:
    """Field ``name`` (``body``, ``value``, ``reply``: no conversion) of a compact payload."""
    i = LAYOUTS[kind].index(name)
    return arr[i] if i < len(arr) else None


def encode_entry(kind: str, payload: dict[str, Any] | list[Any]) -> bytes:
    """[F19] The payload bytes of a new entry of ``kind``: a compact array as it is (the
    builders of ``_records`` make them), a dict as its compact array, or as its JSON object
    when it has no compact form (``_codec.encode_plain``'s checks and errors)."""
    if type(payload) is list:
        return _codec.encode_plain(payload, f"{kind} entry")
    assert isinstance(payload, dict)
    arr = to_array(kind, payload)
    return _codec.encode_plain(payload if arr is None else arr, f"{kind} entry")


#: [F19] Snapshot data at least this long is stored zlib-compressed (when that is shorter).
COMPRESS_FROM = 1024
#: the first byte of a zlib stream (RFC 1950, deflate with a 32 KiB window); snapshot JSON
#: (an object) starts with ``{``
_ZLIB_FIRST = 0x78


def pack_snapshot(data: bytes) -> bytes:
    """[F19] Snapshot data as stored: ``data`` (the state's JSON), zlib-compressed when it
    is at least :data:`COMPRESS_FROM` bytes and compressing makes it shorter."""
    if len(data) >= COMPRESS_FROM:
        packed = zlib.compress(data, 6)
        if len(packed) < len(data):
            return packed
    return data


def snapshot_json(stored: bytes) -> bytes:
    """The state's JSON from snapshot data as stored (:func:`pack_snapshot`). Raises
    ``ValueError`` when compressed data does not decompress."""
    if stored[:1] == bytes((_ZLIB_FIRST,)):
        try:
            return zlib.decompress(stored)
        except zlib.error as exc:
            raise ValueError(f"compressed snapshot data does not decompress: {exc}") from None
    return stored
