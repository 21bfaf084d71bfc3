"""Format 4's packed payloads (docs/FORMAT.md [F21]): how a SQLite file of format 4 stores
the payload of an entry whose fields repeat what the entries next to it already hold.

An entry's payload (the bytes its checksum covers, [F6]) is what every reader gets; a
format-4 file may store instead a *packed* form: one flag byte (1 to 7, never the first
byte of JSON) and the entry's compact array ([F19]) with up to three items replaced:

* flag 1: ``at`` holds the difference in milliseconds from the ``at`` of the entry at
  ``seq - 1`` (then a stored, unpacked compact array);
* flag 2 (an ``intent``): ``key`` holds ``0``: the key is the one [F13] derives from the
  actor id, the ``incarnation`` of the message at ``ref`` (stored unpacked), ``ref`` and
  the intent's ``index`` (and ``task``);
* flag 4 (a ``step``): ``reply`` holds ``0``: the reply is, byte for byte, the ``value``
  of the ``result`` at ``seq - 1`` (stored unpacked, ``ok`` true).

An entry is packed only against entries of the same append (they are written in its
transaction), and only if unpacking gives back its payload byte for byte; anything else is
stored as it is. The view ``entries`` unpacks in SQL (``_sqlite_schema3.PAYLOAD4``, the
same rules), for SQL typed by hand; the store's reads read the stored payloads (the view
``log_rows``) and unpack them in ``_sqlite_unpack`` (before the rows are checked), as
compaction does. A reader unpacks
with the entries at ``seq - 1`` and ``ref`` (which are never packed themselves) and then
verifies the checksum as for any entry: damage to a stored byte of a packed entry changes
its unpacked payload. A packed form that does not unpack (a damaged flag, a replaced item
that is not what its flag says) is handed on as stored, which no checksum matches.

:func:`unpack` is the reference: it decodes the anchors. It puts the runtime's packed intent
and step's items into their stored text; ``_sqlite_unpack`` does that for a whole read,
decoding no anchor where it can.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from actorlog.store import EntryRow

__all__ = [
    "AT",
    "FLAG_BYTES",
    "KEY",
    "REPLY",
    "Anchor",
    "anchor",
    "is_packed",
    "pack_rows",
    "unpack",
]

AT, KEY, REPLY = 1, 2, 4
#: kind -> the position of ``at`` in its compact array ([F19])
_AT = {"message": 1, "intent": 5, "result": 2, "effect": 2, "step": 2}
_PACKED_KINDS = frozenset({"intent", "result", "effect", "step"})

_scan = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
#: the encoder's text of a str (``ensure_ascii`` false: the C function the encoder calls)
_string: Callable[[str], str] = json.encoder.encode_basestring


def _make_encode() -> Any:
    """``_encoder.encode`` without its set-up per call (the C encoder, made once, as the
    runtime's codec does; the same text)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # an interpreter without the C accelerator
        return _encoder.encode
    c = make(
        None, _encoder.default, json.encoder.encode_basestring, None, ":", ",", False, False, False
    )
    return lambda obj: "".join(c(obj, 0))


_encode = _make_encode()

#: a stored entry as packing reads it: its kind, and the items of its payload (None: it is
#: packed, or not a JSON array: nothing is packed against it)
Anchor = tuple[str, "list[Any] | None"]


def is_packed(payload: bytes) -> bool:
    """Is this stored payload a packed form (its flag byte is 1 to 7)?"""
    return payload[:1] in FLAG_BYTES


#: the first byte of a packed payload (one ``in`` per row read finds the packed ones)
FLAG_BYTES = frozenset(bytes((f,)) for f in range(1, 8))
#: ``[true,`` and ``[true,0,``: how the encoder's text of a step with ``ok`` true begins
_OK, _OK0 = "[true,", "[true,0,"


def _items(data: bytes) -> list[Any] | None:
    """The items of a JSON array (None: ``data`` is not one)."""
    if data[:1] != b"[":
        return None
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return None
    return _parse(text)


def _parse(text: str) -> list[Any] | None:
    """The items of the JSON array ``text`` (None: it is not one)."""
    if text[:1] != "[":
        return None
    try:
        got, end = _scan(text, 0)
    except (StopIteration, ValueError, RecursionError):
        return None
    return got if end == len(text) and type(got) is list else None


def _bytes(items: list[Any]) -> bytes | None:
    try:
        data: bytes = _encode(items).encode()
        return data
    except (ValueError, TypeError, RecursionError):  # a lone surrogate, ...
        return None


def anchor(kind: str, payload: bytes) -> Anchor:
    """``(kind, items)`` of a stored entry, parsed once for every entry packed against it."""
    return kind, (None if is_packed(payload) else _items(payload))


def _start(a: Anchor | None) -> int | None:
    """The ``at`` an entry packed against anchor ``a`` counts from (None: it has none)."""
    if a is None or a[1] is None:
        return None
    i = _AT.get(a[0])
    v = a[1][i] if i is not None and i < len(a[1]) else None
    return v if type(v) is int else None


def _key(actor_id: str, ref: int, items: list[Any], message: Anchor | None) -> str | None:
    """The key [F13] derives for an intent of these items of actor ``actor_id``, its step's
    message ``message`` at seq ``ref`` (None: it has no such key)."""
    if message is None or message[0] != "message" or message[1] is None:
        return None
    m = message[1]
    incarnation = m[2] if len(m) > 2 else None
    index = items[0] if items else None
    task = items[7] if len(items) > 7 else ""
    if type(index) is not int or type(incarnation) is not str or type(task) is not str:
        return None
    part = f"{task}.{index}" if task else str(index)
    return f"{actor_id}:{incarnation}:{ref}:{part}"


_NO: Any = object()


def _reply(a: Anchor | None) -> Any:
    """The value of result ``a`` (``_NO``: not an unpacked result with ``ok`` true)."""
    if a is None or a[0] != "result" or a[1] is None or len(a[1]) < 2 or a[1][0] is not True:
        return _NO
    return a[1][1]


def _token(v: Any) -> str | None:
    """The encoder's text of ``v`` (None: it refuses it)."""
    if type(v) is str:
        return _string(v)
    data = _bytes([v])
    return None if data is None else data[1:-1].decode()


def unpack(row: EntryRow, prev: Anchor | None, ref: Anchor | None) -> bytes:
    """The payload of ``row`` (whose stored payload is packed), given the entries at ``seq -
    1`` and at ``ref`` (:func:`anchor`; None: not in the log). The stored bytes as they are
    when they do not unpack (the checksum then finds them).

    The runtime's packed intent (flags 3, six items) and step (flags 4 or 5) get their
    items put back into the stored text (the text before and after them kept as stored:
    the encoder's own, as packing wrote it); any other is decoded and encoded again."""
    stored = row.payload
    flags = stored[0]
    try:
        text = stored[1:].decode()
    except UnicodeDecodeError:
        return stored
    items = _parse(text)
    if items is None or flags & ~7 or row.kind not in _PACKED_KINDS:
        return stored
    fast = None
    if flags == AT | KEY and row.kind == "intent" and len(items) == 6:
        fast = _unpack_intent(row.actor_id, row.ref, text, items, prev, ref)
    elif (flags == REPLY or flags == REPLY | AT) and row.kind == "step" and len(items) > 1:
        fast = _unpack_step(text, items, flags, prev)
    elif flags == AT:  # any entry packed against the one before it alone
        fast = _unpack_at(text, items, _AT[row.kind], prev)
    if fast is not None:
        return fast
    if _bytes(items) != stored[1:]:  # not packing's text of its items: damage, which
        return stored  # decoding and encoding again would not show
    if flags & AT:
        i = _AT[row.kind]
        start = _start(prev)
        delta = items[i] if i < len(items) else None
        if start is None or type(delta) is not int:
            return stored
        items[i] = start + delta
    if flags & KEY:
        if row.kind != "intent" or len(items) < 5 or type(items[4]) is not int or items[4] != 0:
            return stored
        key = _key(row.actor_id, row.ref, items, ref)
        if key is None:
            return stored
        items[4] = key
    if flags & REPLY:
        reply = _reply(prev)
        if row.kind != "step" or len(items) < 2 or items[0] is not True or reply is _NO:
            return stored
        if type(items[1]) is not int or items[1] != 0:
            return stored
        items[1] = reply
    return _bytes(items) or stored


def _unpack_intent(
    actor_id: str,
    message_seq: int,
    text: str,
    items: list[Any],
    prev: Anchor | None,
    ref: Anchor | None,
) -> bytes | None:
    """:func:`unpack` of an intent of six items packed with flags 3, its key and its ``at``
    put into the stored text (None: not that, or it does not unpack)."""
    delta, start = items[5], _start(prev)
    if type(items[4]) is not int or items[4] != 0 or type(delta) is not int or start is None:
        return None
    key = _key(actor_id, message_seq, items, ref)
    if key is None:
        return None
    try:
        tail = f",0,{delta}]"  # the stored text of items 4 and 5
        if not text.endswith(tail):
            return None
        return f"{text[: -len(tail)]},{_string(key)},{start + delta}]".encode()
    except (ValueError, UnicodeEncodeError):  # an integer too long for text, a surrogate
        return None


def _unpack_at(text: str, items: list[Any], i: int, prev: Anchor | None) -> bytes | None:
    """:func:`unpack` of an entry packed with flag 1 alone (its ``at``, item ``i``, the
    difference): the ``at`` put into the stored text, whose items after it must be the
    encoder's text of them (None: not that, or it does not unpack)."""
    start, delta = _start(prev), items[i] if i < len(items) else None
    if start is None or type(delta) is not int:
        return None
    try:
        tail = "," + _encode(items[i + 1 :])[1:] if i + 1 < len(items) else "]"
        if not text.endswith(f",{delta}{tail}"):
            return None
        return f"{text[: -len(f',{delta}{tail}')]},{start + delta}{tail}".encode()
    except (ValueError, TypeError, RecursionError, UnicodeEncodeError):
        return None


def _unpack_step(text: str, items: list[Any], flags: int, prev: Anchor | None) -> bytes | None:
    """:func:`unpack` of a step packed with flag 4 (and 1): the text of the result's value
    (and the ``at``) put into the stored text (None: not that, or it does not unpack)."""
    if not text.startswith(_OK0) or items[0] is not True or type(items[1]) is not int:
        return None
    if items[1] != 0 or prev is None or prev[0] != "result" or prev[1] is None:
        return None
    value = prev[1]
    if len(value) < 2 or value[0] is not True:
        return None
    reply = _token(value[1])
    if reply is None:
        return None
    try:
        if not flags & AT:
            return f"{_OK}{reply}{text[7:]}".encode()
        start = _start(prev)
        delta = items[2] if len(items) > 2 else None
        if start is None or type(delta) is not int:
            return None
        d = str(delta)
        if not text.startswith(d, 8) or text[8 + len(d) : 9 + len(d)] not in (",", "]"):
            return None
        return f"{_OK}{reply},{start + delta}{text[8 + len(d) :]}".encode()
    except (ValueError, UnicodeEncodeError):
        return None


def pack_rows(rows: Sequence[EntryRow]) -> list[EntryRow]:
    """The rows of one append (one actor, consecutive seqs) as a format-4 file stores them:
    each packed against the unpacked rows before it in the same append where that pays, and
    unpacking gives back its payload exactly (a payload that is not this encoder's own text
    is never packed); the others as they are."""
    if len(rows) < 2:  # the first row has nothing of its append before it
        return list(rows)
    out: list[EntryRow] = []
    seen: dict[int, Anchor] = {}  # seq -> the row as stored, this append
    last = len(rows) - 1
    for i, row in enumerate(rows):
        kind = row.kind
        if i == last and kind not in _PACKED_KINDS:
            out.append(row)  # neither packed nor an anchor: not even parsed
            break
        new = row
        payload = row.payload
        items = text = None
        if payload[:1] == b"[":
            try:
                text = payload.decode()
            except UnicodeDecodeError:
                pass
            else:
                items = _parse(text)
        if i and items is not None and text is not None and kind in _PACKED_KINDS:
            new = _pack(row, text, items, seen.get(row.seq - 1), seen.get(row.ref)) or row
        seen[row.seq] = (kind, items if new is row else None)
        out.append(new)
    return out


def _pack(
    row: EntryRow, text: str, items: list[Any], prev: Anchor | None, ref: Anchor | None
) -> EntryRow | None:
    flags = 0
    kind = row.kind
    start, i = _start(prev), _AT[kind]
    if start is not None and i < len(items) and type(items[i]) is int:
        flags |= AT
    reply = None  # the text of the result's value, when the step's reply is that text
    canonical = False  # is ``text`` known to be the encoder's text of ``items``?
    if kind == "step" and len(items) > 1 and items[0] is True:
        value = _reply(prev)
        reply = None if value is _NO else _token(value)
        if reply is not None:
            try:  # the rest of the step (its ``at``, duration, span) is small
                rest = "," + _encode(items[2:])[1:] if len(items) > 2 else "]"
            except (ValueError, TypeError, RecursionError):
                return None
            # the encoder's text of a reply is its value's (equal texts: equal values), so
            # this is the step's own text with the result's value as its reply
            canonical = text == _OK + reply + rest
            if canonical:
                flags |= REPLY
            else:  # another reply, or not the encoder's text: not packed against it
                reply = None
    key = items[4] if kind == "intent" and len(items) > 4 else None
    if type(key) is str and key == _key(row.actor_id, row.ref, items, ref):
        flags |= KEY
    if not flags:
        return None
    # exact by construction: ``items`` encode to the payload, and unpacking puts back into
    # the items encoded here (only integers replaced) what was taken out (an ``at``, a key
    # equal to the derived one, a reply whose text is the result value's); the runtime's
    # intent and step are written by replacing those items' text in the payload's, which
    # gives the same bytes as encoding the replaced items
    try:
        if not canonical and _encode(items) != text:
            return None
    except (ValueError, TypeError, RecursionError):  # a lone surrogate, ...
        return None
    data = None
    if flags == AT | KEY and len(items) == 6 and start is not None and type(key) is str:
        tail = f",{_string(key)},{items[5]}]"
        if text.endswith(tail):
            data = f"{text[: -len(tail)]},0,{items[5] - start}]"
    elif reply is not None and (flags == REPLY or flags == REPLY | AT):
        data = _packed_step(text, items, flags, start, reply)
    if data is None:
        packed = list(items)
        if flags & AT and start is not None:
            packed[i] = items[i] - start
        if flags & REPLY:
            packed[1] = 0
        if flags & KEY:
            packed[4] = 0
        got = _bytes(packed)
        if got is None:
            return None
        payload = bytes((flags,)) + got
    else:
        payload = bytes((flags,)) + data.encode()
    return EntryRow(
        row.actor_id,
        row.seq,
        row.kind,
        row.type_tag,
        row.ref,
        row.message_id,
        payload,
        row.checksum,
    )


def _packed_step(
    text: str, items: list[Any], flags: int, start: int | None, reply: str
) -> str | None:
    """The packed text of step ``text`` (the encoder's text of ``items``, ``ok`` true, its
    reply's ``reply``) whose reply (and ``at``) are replaced (None: not found where they
    must be)."""
    head = _OK + reply
    if not text.startswith(head) or text[len(head) : len(head) + 1] != ",":
        return None
    if not flags & AT:
        return _OK0[:-1] + text[len(head) :]
    if start is None or len(items) < 3 or type(items[2]) is not int:
        return None
    at = str(items[2])
    p = len(head) + 1
    if not text.startswith(at, p):
        return None
    return f"{_OK0}{items[2] - start}{text[p + len(at) :]}"
