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
``log_rows``) and unpack them here (:func:`unpack_values`, before the rows are checked),
as compaction does (:func:`unpack_rows`). A reader unpacks
with the entries at ``seq - 1`` and ``ref`` (which are never packed themselves) and then
verifies the checksum as for any entry: damage to a stored byte of a packed entry changes
its unpacked payload. A packed form that does not unpack (a damaged flag, a replaced item
that is not what its flag says) is handed on as stored, which no checksum matches.

The runtime's packed intent and step unpack by splicing text: the step's reply is the
result's value as stored where that is the encoder's text of it (no decoding of the
result), the intent's key and ``at`` are put into its stored text; :func:`unpack` (which
decodes the anchors) takes every other case, with the same result.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable, Sequence
from itertools import compress, count, repeat
from typing import TYPE_CHECKING, Any

from actorlog.store import ENTRY_COLUMNS, EntryRow

__all__ = [
    "PackedReads",
    "AT",
    "Anchor",
    "KEY",
    "REPLY",
    "anchor",
    "is_packed",
    "pack_rows",
    "unpack",
    "unpack_rows",
    "unpack_values",
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
    return payload[:1] in _FLAG_BYTES


#: the first byte of a packed payload (one ``in`` per row read finds the packed ones)
_FLAG_BYTES = frozenset(bytes((f,)) for f in range(1, 8))
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


#: the encoder's text of an integer (no ``-0``, no leading zero; at most 18 digits: a
#: longer one takes :func:`unpack`'s way), and the end of its item
_I = rb"(0|-?[1-9][0-9]{0,17})(?=[,\]])"
#: a step packed with flags 5: ``ok`` true, its reply ``0``, its ``at`` difference
_STEP5 = re.compile(rb"\x05\[true,0," + _I).match
#: a result's ``at`` after its value
_AFTER = re.compile(rb"," + _I).match


def _step(p: bytes, r: bytes) -> bytes | None:
    """:func:`unpack` of step payload ``p`` (flag 4, and 1) against the stored payload ``r``
    of the result at ``seq - 1``, decoding neither: the value's stored text where it is the
    encoder's (a string without a backslash: JSON's strings hold no control character; an
    integer; a name) and the ``at`` spliced in, the step's other text kept (None:
    :func:`unpack` decides)."""
    if r[:7] == b'[true,"':
        end = r.find(b'"', 7) + 1
        if not end or r.find(b"\\", 7, end) >= 0:
            return None
    else:
        v = _SCALAR(r, 6) if r[:6] == b"[true," else None
        if v is None:
            return None
        end = v.end()
    if p[0] == REPLY:
        return b"[true," + r[6:end] + p[8:] if p[1:9] == b"[true,0," else None
    d = _STEP5(p)
    at = _AFTER(r, end)
    if d is None or at is None:
        return None
    return b"[true,%s,%d%s" % (r[6:end], int(at[1]) + int(d[1]), p[d.end() :])


#: a result's value that is no string, as the encoder writes it (``ok`` true)
_SCALAR = re.compile(rb"(?:0|-?[1-9][0-9]{0,17}|true|false|null)(?=[,\]])").match


def _intent(
    actor_id: str, ref: int, p: bytes, m: bytes, keys: dict[tuple[str, str], bytes]
) -> bytes | None:
    """:func:`unpack` of the runtime's intent (flags 3, six items) whose message (stored
    payload ``m``) is at ``seq - 1``: key and ``at`` put into its stored text, the message
    decoded once (None: :func:`unpack` decides); ``keys``: keys' starts, made once."""
    try:
        text = p[1:].decode()
        items, end = _scan(text, 0)
        if end != len(text) or type(items) is not list or len(items) != 6:
            return None
        body = m.decode()
        got, end = _scan(body, 0)
        if end != len(body) or type(got) is not list or len(got) < 3:
            return None
        index, zero, delta, start, incarnation = items[0], items[4], items[5], got[1], got[2]
        if type(index) is not int or type(zero) is not int or zero or type(delta) is not int:
            return None
        if type(start) is not int or type(incarnation) is not str:
            return None
        tail = b",0,%d]" % delta  # the stored text of items 4 and 5
        if not p.endswith(tail):
            return None
        key = keys.get((actor_id, incarnation))
        if key is None:  # the start of the key's text (its escapes are all there)
            key = _string(f"{actor_id}:{incarnation}:")[:-1].encode()
            keys[actor_id, incarnation] = key
        return b'%s,%s%d:%d",%d]' % (p[1 : -len(tail)], key, ref, index, start + delta)
    except (UnicodeError, StopIteration, ValueError, RecursionError):
        return None  # not text, not JSON, an integer too long for text, a surrogate


#: an entry's column values (``ENTRY_COLUMNS`` order); a row's payload, of its values
_VALUES, _PAYLOAD = operator.attrgetter(*ENTRY_COLUMNS), operator.itemgetter(6)


def unpack_values(
    rows: Sequence[Sequence[Any]], more: dict[int, tuple[str, bytes]]
) -> tuple[list[Sequence[Any]], list[int]]:
    """``rows`` (one actor's, by seq, column values in ``ENTRY_COLUMNS`` order) unpacked, and
    the seqs of entries unpacking needs that neither they nor ``more`` (stored ``(kind,
    payload)`` by seq) hold: read those, unpack again. A damaged row is left as it is."""
    try:  # a packed payload sorts before b"\x08" (so may a damaged one)
        todo = list(compress(count(), map(operator.lt, map(_PAYLOAD, rows), repeat(b"\x08"))))
    except TypeError:  # a payload that is not bytes (damage)
        todo = [i for i, r in enumerate(rows) if type(r[6]) is bytes and r[6] < b"\x08"]
    out = list(rows)
    if not todo:
        return out, []
    absent: list[int] = []
    keys: dict[tuple[str, str], bytes] = {}
    by_seq: dict[Any, Sequence[Any]] = {}  # made when an entry is not where it is expected
    for i in todo:
        row = rows[i]
        actor_id, seq, kind, _, ref, _, p, _ = row
        a = rows[i - 1] if i else None  # the entry at seq - 1, where a read has it
        new = None
        try:  # the runtime's step and intent, packed against the entry before them
            if a is None or a[1] != seq - 1 or type(a[6]) is not bytes:
                pass
            elif kind == "step" and a[2] == "result" and (p[0] == 5 or p[0] == 4):
                new = _step(p, a[6])
            elif kind == "intent" and a[2] == "message" and p[0] == 3 and ref == seq - 1:
                new = _intent(actor_id, ref, p, a[6], keys) if type(actor_id) is str else None
        except (TypeError, IndexError):  # a damaged column: the general way checks
            pass
        if new is None:
            new = _general(rows, i, more, absent, by_seq)
        if new is not p:
            out[i] = (*row[:6], new, row[7])
    return out, sorted(set(absent))


def _general(
    rows: Sequence[Sequence[Any]],
    i: int,
    more: dict[int, tuple[str, bytes]],
    absent: list[int],
    by_seq: dict[Any, Sequence[Any]],
) -> Any:
    """The payload of ``rows[i]`` as :func:`unpack` gives it (as stored: not packed, or a
    column damaged), adding to ``absent`` the seqs it needs that ``rows``, ``more`` lack."""
    row = rows[i]
    seq, ref, p = row[1], row[4], row[6]
    if type(p) is not bytes or p[:1] not in _FLAG_BYTES or type(seq) is not int:
        return p
    if type(ref) is not int or type(row[0]) is not str:
        return p
    found: list[Anchor | None] = []
    for want, needed in ((seq - 1, p[0] & (AT | REPLY)), (ref, p[0] & KEY)):
        a: Any = None
        if needed and want > 0:
            j = i - (seq - want)  # where a read of consecutive seqs has it
            if 0 <= j < len(rows) and rows[j][1] == want:
                a = (rows[j][2], rows[j][6])
            elif want in more:
                a = more[want]
            else:
                by_seq.update(() if by_seq else ((r[1], r) for r in rows))
                a = by_seq.get(want)
                a = None if a is None else (a[2], a[6])
                if a is None:
                    absent.append(want)
        ok = a is not None and type(a[0]) is str and type(a[1]) is bytes  # else: damage
        found.append(anchor(a[0], a[1]) if ok else None)
    return unpack(EntryRow(*row), found[0], found[1])


def unpack_rows(rows: list[EntryRow], more: dict[int, tuple[str, bytes]]) -> list[EntryRow]:
    """:func:`unpack_values` of rows already checked (no entry they need is absent)."""
    if not any(r.payload[:1] in _FLAG_BYTES for r in rows):
        return list(rows)
    values, _ = unpack_values([_VALUES(r) for r in rows], more)
    return [r if v[6] is r.payload else EntryRow(*v) for r, v in zip(rows, values, strict=True)]


class PackedReads:
    """``SqliteStore``'s unpacking of what it reads (a mixin)."""

    if TYPE_CHECKING:
        layout: int

        async def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...

    def _stored_rows(self, sql: str) -> str:
        """A read of ``entries`` as one of ``log_rows`` in a format-4 file: the stored payloads,
        unpacked in Python (cheaper than the SQL of ``entries`` for every packed one)."""
        return sql.replace("FROM entries", "FROM log_rows", 1) if self.layout >= 4 else sql

    async def _unpacked_values(self, rows: list[Any]) -> list[Any]:
        """[F21] ``rows`` (one actor's, by seq, column values as read) unpacked in a format-4
        file, before they are checked, reading the entries they need that they lack."""
        if self.layout < 4 or not rows:
            return rows
        got, absent = unpack_values(rows, {})
        if absent:
            got, _ = unpack_values(rows, await self._anchors(rows[0][0], absent))
        return got

    async def _unpacked(self, rows: list[EntryRow]) -> list[EntryRow]:
        """:meth:`_unpacked_values` of rows already checked."""
        if self.layout < 4 or not any(r.payload[:1] in _FLAG_BYTES for r in rows):
            return rows
        values = await self._unpacked_values([_VALUES(r) for r in rows])
        return [r if v[6] is r.payload else EntryRow(*v) for r, v in zip(rows, values, strict=True)]

    async def _anchors(self, actor_id: Any, seqs: list[int]) -> dict[int, tuple[str, bytes]]:
        """The stored ``(kind, payload)`` of these entries of the actor, by seq (a damaged
        column: left out, nothing to unpack with)."""
        found = await self._fetch(
            "SELECT seq, kind, payload FROM log_rows WHERE actor_id = ? AND seq IN ("
            + ",".join("?" * len(seqs))
            + ")",
            (actor_id, *seqs),
        )
        return {
            seq: (kind, payload)
            for seq, kind, payload in found
            if type(seq) is int and type(kind) is str and type(payload) is bytes
        }
