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
transaction), and only if unpacking gives back its payload byte for byte (checked before
it is written); anything else is stored as it is. A reader unpacks with the entries at
``seq - 1`` and ``ref`` (which are never packed themselves) and then verifies the checksum
as for any entry: damage to a stored byte of either entry changes the unpacked payload.
A packed form that does not unpack (a damaged flag, a replaced item that is not what its
flag says) is handed on as stored, which no checksum matches.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from actorlog.store import EntryRow

__all__ = [
    "AT",
    "KEY",
    "REPLY",
    "is_packed",
    "missing",
    "needs",
    "pack_rows",
    "unpack",
    "unpack_rows",
]

AT, KEY, REPLY = 1, 2, 4
#: kind -> the position of ``at`` in its compact array ([F19])
_AT = {"message": 1, "intent": 5, "result": 2, "effect": 2, "step": 2}
_PACKED_KINDS = frozenset({"intent", "result", "effect", "step"})

_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_text = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def is_packed(payload: bytes) -> bool:
    """Is this stored payload a packed form (its flag byte is 1 to 7)?"""
    return 0 < payload[0] < 8 if payload else False


def _items(data: bytes) -> tuple[list[str], list[Any]] | None:
    """The top-level items of a compact JSON array (their text, their values), or None if
    ``data`` is not one (whitespace, not UTF-8, another value)."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return None
    if len(text) < 2 or text[0] != "[" or text[-1] != "]":
        return None
    texts: list[str] = []
    values: list[Any] = []
    i, end = 1, len(text) - 1
    if i == end:
        return texts, values
    try:
        while True:
            value, j = _scan(text, i)
            texts.append(text[i:j])
            values.append(value)
            if j == end:
                return texts, values
            if text[j] != ",":
                return None
            i = j + 1
    except (StopIteration, ValueError, RecursionError):
        return None


def _join(texts: list[str]) -> bytes:
    return ("[" + ",".join(texts) + "]").encode()


def _at(kind: str, values: list[Any]) -> int | None:
    i = _AT.get(kind)
    if i is None or i >= len(values):
        return None
    v = values[i]
    return v if type(v) is int else None


def _key(actor_id: str, ref: int, values: list[Any], incarnation: Any) -> str | None:
    """The key [F13] derives for an intent of these items (None: it has no such key)."""
    index = values[0] if values else None
    task = values[7] if len(values) > 7 else ""
    if type(index) is not int or type(incarnation) is not str or type(task) is not str:
        return None
    part = f"{task}.{index}" if task else str(index)
    return f"{actor_id}:{incarnation}:{ref}:{part}"


def _incarnation(message: tuple[str, bytes] | None) -> Any:
    if message is None or message[0] != "message":
        return None
    got = _items(message[1])
    return got[1][2] if got is not None and len(got[1]) > 2 else None


def unpack(row: EntryRow, prev: tuple[str, bytes] | None, ref: tuple[str, bytes] | None) -> bytes:
    """The payload of ``row`` (whose stored payload is packed), given the stored ``(kind,
    payload)`` of the entries at ``seq - 1`` and at ``ref`` (None: not in the log). The
    stored bytes as they are when they do not unpack (the checksum then finds them)."""
    stored = row.payload
    flags = stored[0]
    got = _items(stored[1:])
    if got is None or flags & ~7 or row.kind not in _PACKED_KINDS:
        return stored
    texts, values = got
    if flags & AT:
        i = _AT[row.kind]
        base = None if prev is None or is_packed(prev[1]) else _items(prev[1])
        start = None if base is None else _at(prev[0] if prev else "", base[1])
        delta = values[i] if i < len(values) else None
        if start is None or type(delta) is not int or texts[i] != str(delta):
            return stored
        texts[i] = str(start + delta)
    if flags & KEY:
        if row.kind != "intent" or len(texts) < 5 or texts[4] != "0":
            return stored
        if ref is None or is_packed(ref[1]):
            return stored
        key = _key(row.actor_id, row.ref, values, _incarnation(ref))
        if key is None:
            return stored
        texts[4] = _text(key)
    if flags & REPLY:
        if row.kind != "step" or len(texts) < 2 or texts[1] != "0" or texts[0] != "true":
            return stored
        if prev is None or prev[0] != "result" or is_packed(prev[1]):
            return stored
        result = _items(prev[1])
        if result is None or len(result[0]) < 2 or result[0][0] != "true":
            return stored
        texts[1] = result[0][1]
    return _join(texts)


def pack_rows(rows: Sequence[EntryRow]) -> list[EntryRow]:
    """The rows of one append (one actor, consecutive seqs) as a format-4 file stores them:
    each packed against the unpacked rows before it in the same append where that pays, and
    unpacking gives back its payload exactly; the others as they are."""
    out: list[EntryRow] = []
    stored: dict[int, tuple[str, bytes]] = {}  # seq -> (kind, stored payload), this append
    for row in rows:
        new = row
        if row.kind in _PACKED_KINDS and row.payload[:1] == b"[":
            new = _pack(row, stored.get(row.seq - 1), stored.get(row.ref)) or row
        stored[row.seq] = (row.kind, new.payload)
        out.append(new)
    return out


def _pack(
    row: EntryRow, prev: tuple[str, bytes] | None, ref: tuple[str, bytes] | None
) -> EntryRow | None:
    got = _items(row.payload)
    if got is None or _join(got[0]) != row.payload:
        return None
    texts, values = got
    flags = 0
    base = None if prev is None or is_packed(prev[1]) else _items(prev[1])
    if base is not None:
        start, at = _at(prev[0] if prev else "", base[1]), _at(row.kind, values)
        if start is not None and at is not None:
            texts[_AT[row.kind]] = str(at - start)
            flags |= AT
        if (
            row.kind == "step"
            and prev is not None
            and prev[0] == "result"
            and len(texts) > 1
            and texts[0] == "true"
            and base[0][:1] == ["true"]
            and len(base[0]) > 1
            and texts[1] == base[0][1]
        ):
            texts[1] = "0"
            flags |= REPLY
    if row.kind == "intent" and len(texts) > 4 and ref is not None and not is_packed(ref[1]):
        key = _key(row.actor_id, row.ref, values, _incarnation(ref))
        if key is not None and texts[4] == _text(key):
            texts[4] = "0"
            flags |= KEY
    if not flags:
        return None
    packed = bytes((flags,)) + _join(texts)
    new = EntryRow(
        row.actor_id, row.seq, row.kind, row.type_tag, row.ref, row.message_id, packed, row.checksum
    )
    if unpack(new, prev, ref) != row.payload:  # never store what does not come back
        return None
    return new


def needs(row: EntryRow) -> tuple[int, ...]:
    """The seqs whose stored payloads unpacking ``row`` reads (none if it is not packed)."""
    p = row.payload
    if not is_packed(p):
        return ()
    flags = p[0]
    out = []
    if flags & (AT | REPLY):
        out.append(row.seq - 1)
    if flags & KEY:
        out.append(row.ref)
    return tuple(out)


def missing(rows: Sequence[EntryRow]) -> list[int]:
    """The seqs whose stored payloads unpacking ``rows`` reads and ``rows`` does not hold."""
    have = {r.seq for r in rows}
    return sorted({s for r in rows for s in needs(r) if s not in have and s > 0})


def unpack_rows(rows: list[EntryRow], more: dict[int, tuple[str, bytes]]) -> list[EntryRow]:
    """``rows`` (of one actor) with their payloads unpacked; ``more`` holds the stored
    ``(kind, payload)`` of the entries :func:`missing` named."""
    have = {r.seq: (r.kind, r.payload) for r in rows}
    have.update(more)
    out = []
    for r in rows:
        if is_packed(r.payload):
            want = needs(r)
            prev = have.get(r.seq - 1) if r.seq - 1 in want else None
            ref = have.get(r.ref) if r.ref in want else None
            payload = unpack(r, prev, ref)
            r = EntryRow(
                r.actor_id, r.seq, r.kind, r.type_tag, r.ref, r.message_id, payload, r.checksum
            )
        out.append(r)
    return out
