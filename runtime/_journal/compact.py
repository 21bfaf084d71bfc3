"""[F19] Format 2's compact payloads: an entry's payload as a JSON array of its fields in a
fixed order per kind (no keys), times as integers, codes for the effect and policy names,
and the trailing fields that hold their default left out.

The runtime builds and reads payloads as dicts (``_records``); this module turns one into
the other at the codec's edge: :func:`to_array` when an entry is encoded, :func:`to_object`
when it is decoded (a format-1 payload is a JSON object and is read as it is).
"""

from __future__ import annotations

import zlib
from typing import Any

from . import codec as _codec

__all__ = [
    "LAYOUTS",
    "encode_entry",
    "field_at",
    "pack_snapshot",
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


#: what a reader takes for an absent field (FORMAT.md [F7] rule 5), as it is encoded here
_DEFAULTS: dict[str, Any] = {
    "attempt": 1,
    "settled_by": 0,
    "kwargs": {},
    "task": "",
    "in_doubt": False,
}


def _is_default(name: str, v: Any) -> bool:
    """Does ``v`` (encoded) hold the default of field ``name``?"""
    d = _DEFAULTS.get(name)
    return type(v) is type(d) and v == d


def _time(v: Any, scale: int) -> Any:
    """A time in seconds as an integer count of ``1/scale`` seconds (None stays None)."""
    if type(v) is float or type(v) is int:
        return round(v * scale)
    return _MISSING  # not a number: this payload is written as an object


def to_array(kind: str, p: dict[str, Any]) -> list[Any] | None:
    """The compact form of payload ``p`` of an entry of ``kind``, or None when it has none
    (a decision, a key this layout does not know, a time that is not a number): such a
    payload is written as its JSON object, which every reader reads too."""
    names = LAYOUTS.get(kind)
    if names is None or not p.keys() <= _KNOWN[kind]:
        return None
    second = names[1]
    error = "error" in p
    if error and (p.get("ok") is not False or second not in ("value", "reply") or second in p):
        return None
    out = []
    for name in names:
        v = p["error"] if error and name == second else p.get(name, _DEFAULTS.get(name))
        if name == "at" and v is not None:
            v = _time(v, 1000)
        elif name == "duration" and v is not None:
            v = _time(v, 1_000_000)
        elif name in _ENCODE_CODES and type(v) is str:
            v = _ENCODE_CODES[name].get(v, v)
        if v is _MISSING:
            return None
        out.append(v)
    while len(out) > 2 and _is_default(names[len(out) - 1], out[-1]):
        out.pop()
    return out


class LayoutError(ValueError):
    """A compact payload that breaks its layout (the text says how)."""


def to_object(kind: str, arr: list[Any]) -> dict[str, Any]:
    """The payload dict of compact payload ``arr`` of an entry of ``kind``.

    Raises:
        LayoutError: ``kind`` has no compact form, there are more items than fields, or a
            time or code is not of its type.
    """
    names = LAYOUTS.get(kind)
    if names is None:
        raise LayoutError(f"a {kind} payload is a JSON object, not an array")
    if not 2 <= len(arr) <= len(names):
        raise LayoutError(f"{len(arr)} items, a {kind} payload has 2 to {len(names)}")
    p = dict(zip(names, arr, strict=False))
    if len(arr) > 1 and names[1] in ("value", "reply") and arr[0] is False:
        p["error"] = p.pop(names[1])
    for name, scale in (("at", 1000), ("duration", 1_000_000)):
        v = p.get(name)
        if v is not None:
            if type(v) is not int:
                raise LayoutError(f"field {name!r} is not an integer: {str(v)[:40]}")
            p[name] = v / scale
    for name, codes in CODES.items():
        v = p.get(name)
        if type(v) is int:
            if not 0 <= v < len(codes):
                raise LayoutError(f"field {name!r} holds the unknown code {v}")
            p[name] = codes[v]
    return p


def field_at(kind: str, arr: list[Any], name: str) -> Any:
    """Field ``name`` (``body``, ``value``, ``reply``: no conversion) of a compact payload."""
    i = LAYOUTS[kind].index(name)
    return arr[i] if i < len(arr) else None


def encode_entry(kind: str, payload: dict[str, Any]) -> bytes:
    """[F19] The payload bytes of a new entry of ``kind``: its compact array, or its JSON
    object when it has no compact form (``_codec.encode_plain``'s checks and errors)."""
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
