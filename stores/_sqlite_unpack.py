"""``SqliteStore``'s reads of the log (:class:`PackedReads`: a read by seq, a message by id,
the message ids, the entries that refer to one), in each layout's SQL (format 5's reads a
range of rowids, FORMAT.md [F24]); and the unpacking of formats 4 and 5 (docs/FORMAT.md
[F21]): the rows a read gets, unpacked before they are checked, as ``_sqlite_pack.unpack``
unpacks them.

The runtime's packed entries unpack by splicing stored text, decoding no anchor: the step's
reply is the result's value as stored where that is the encoder's text of it; the ``at`` of
a step, a result or an intent packed with flag 1 alone against a result or a step is its
difference added to the ``at`` read from that entry's text; the intent's key and ``at`` are
put into its stored text (its message decoded once). Every other case, and every text these
do not recognize, takes ``_sqlite_pack.unpack`` (which decodes the anchors), with the same
result for what packing wrote; a stored text that packing did not write unpacks to bytes no
checksum matches either way.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Sequence
from itertools import compress, count, repeat
from typing import TYPE_CHECKING, Any

from actorlog.store import (
    ENTRY_COLUMNS,
    ConfigurationError,
    EntryRow,
    StoreCorruptError,
    entry_row,
)

from . import _sqlite_pack as _pack
from ._sql import ENTRY_COLS, entries, select_entries
from ._sqlite_pack import AT, FLAG_BYTES, KEY, REPLY, Anchor
from ._sqlite_schema3 import (
    KIND_CODES,
    MAX_SEQ,
    MESSAGE5,
    MESSAGE_IDS,
    MESSAGE_IDS5,
    REF5,
    anchors5,
    read5,
)

_scan, _string = _pack._scan, _pack._string  # the decoder and encoder packing uses

__all__ = ["PackedReads", "unpack_rows", "unpack_values"]

#: the kinds whose ``at`` is item 2, after ``ok`` and a value (:func:`_at`)
_AT2 = frozenset({"result", "step"})

#: the encoder's text of an integer (no ``-0``, no leading zero; at most 18 digits: a
#: longer one takes ``_pack.unpack``'s way), and the end of its item
_I = rb"(0|-?[1-9][0-9]{0,17})(?=[,\]])"
#: a step packed with flags 5: ``ok`` true, its reply ``0``, its ``at`` difference
_STEP5 = re.compile(rb"\x05\[true,0," + _I).match
#: a result's ``at`` after its value
_AFTER = re.compile(rb"," + _I).match


def _item1(b: bytes) -> int:
    """The end of item 1 of the stored text ``b`` of a result or step with ``ok`` true where
    that item is the encoder's text of a string without a backslash (JSON's strings hold no
    control character), an integer or a name (-1: another item; decoding decides)."""
    if b[:7] == b'[true,"':
        end = b.find(b'"', 7) + 1
        return end if end and b.find(b"\\", 7, end) < 0 else -1
    v = _SCALAR(b, 6) if b[:6] == b"[true," else None
    return -1 if v is None else v.end()


def _step(p: bytes, r: bytes) -> bytes | None:
    """``_pack.unpack`` of step payload ``p`` (flag 4, and 1) against the stored payload ``r``
    of the result at ``seq - 1``, decoding neither: the value's stored text where
    :func:`_item1` finds it and the ``at`` spliced in, the step's other text kept (None:
    ``_pack.unpack`` decides)."""
    if r[:7] == b'[true,"':  # :func:`_item1`, inline (the runtime's every step)
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


def _at(p: bytes, a: bytes) -> bytes | None:
    """``_pack.unpack`` of result or step payload ``p`` packed with flag 1 alone against the
    stored payload ``a`` of the result or step at ``seq - 1`` (both ``ok`` true, their item
    1 what :func:`_item1` finds): its ``at`` spliced in, decoding neither (None:
    ``_pack.unpack`` decides)."""
    end, mine = _item1(a), _item1(p[1:])
    start = _AFTER(a, end) if end > 0 else None
    d = _AFTER(p, mine + 1) if mine > 0 else None
    if start is None or d is None:
        return None
    return b"%s,%d%s" % (p[1 : mine + 1], int(start[1]) + int(d[1]), p[d.end() :])


def _intent_at(p: bytes, a: bytes) -> bytes | None:
    """``_pack.unpack`` of an intent of six items packed with flag 1 alone (a step's call after
    its previous call's result, in that result's append) against the stored payload ``a`` of
    the result or step at ``seq - 1`` (``ok`` true, its item 1 what :func:`_item1` finds):
    the intent decoded, its ``at`` spliced in, ``a`` not decoded (None: ``_pack.unpack``
    decides)."""
    end = _item1(a)
    start = _AFTER(a, end) if end > 0 else None
    if start is None:
        return None
    try:
        text = p[1:].decode()
        items, stop = _scan(text, 0)
    except (UnicodeError, StopIteration, ValueError, RecursionError):
        return None
    if stop != len(text) or type(items) is not list or len(items) != 6:
        return None
    delta = items[5]
    if type(delta) is not int or not p.endswith(b",%d]" % delta):
        return None
    return b"%s%d]" % (p[1 : len(p) - len(b"%d]" % delta)], int(start[1]) + delta)


#: a result's value that is no string, as the encoder writes it (``ok`` true)
_SCALAR = re.compile(rb"(?:0|-?[1-9][0-9]{0,17}|true|false|null)(?=[,\]])").match


def _intent(
    actor_id: str, ref: int, p: bytes, m: bytes, keys: dict[tuple[str, str], bytes]
) -> bytes | None:
    """``_pack.unpack`` of the runtime's intent (flags 3, six items) whose message (stored
    payload ``m``) is at ``seq - 1``: key and ``at`` put into its stored text, the message
    decoded once (None: ``_pack.unpack`` decides); ``keys``: keys' starts, made once."""
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
        b = rows[i - 1] if i else None  # the entry at seq - 1, where a read has it
        new = None
        try:  # the runtime's step and intent, packed against the entry before them
            if b is not None and b[1] == seq - 1:
                ak, ap = b[2], b[6]
            else:  # read by itself (a read starting after it)
                ak, ap = more.get(seq - 1) or (None, None)
            if type(ap) is not bytes:
                pass
            elif kind == "step" and ak == "result" and (p[0] == 5 or p[0] == 4):
                new = _step(p, ap)
            elif kind == "intent" and ak == "message" and p[0] == 3 and ref == seq - 1:
                new = _intent(actor_id, ref, p, ap, keys) if type(actor_id) is str else None
            elif p[0] != AT or ak not in _AT2:
                pass
            elif kind in _AT2:  # a step whose reply is not the result's value
                new = _at(p, ap)
            elif kind == "intent":  # a step's next call, in its previous call's append
                new = _intent_at(p, ap)
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
    """The payload of ``rows[i]`` as ``_sqlite_pack.unpack`` gives it (as stored: not packed,
    a column damaged, or an entry it needs that ``rows``, ``more`` lack: added to ``absent``,
    read before the second pass)."""
    row = rows[i]
    seq, ref, p = row[1], row[4], row[6]
    if type(p) is not bytes or p[:1] not in FLAG_BYTES or type(seq) is not int:
        return p
    if type(ref) is not int or type(row[0]) is not str:
        return p
    found: list[Anchor | None] = []
    lost = False
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
                    lost = True
        ok = a is not None and type(a[0]) is str and type(a[1]) is bytes  # else: damage
        found.append(_pack.anchor(a[0], a[1]) if ok else None)
    if lost:  # as stored: unpack gives that without an anchor it needs
        return p
    return _pack.unpack(EntryRow(*row), found[0], found[1])


def unpack_rows(rows: list[EntryRow], more: dict[int, tuple[str, bytes]]) -> list[EntryRow]:
    """:func:`unpack_values` of rows already checked (no entry they need is absent)."""
    if not any(r.payload[:1] in FLAG_BYTES for r in rows):
        return list(rows)
    values, _ = unpack_values([_VALUES(r) for r in rows], more)
    return [r if v[6] is r.payload else EntryRow(*v) for r, v in zip(rows, values, strict=True)]


class PackedReads:
    """``SqliteStore``'s reads of the log (a mixin): the queries of each layout, and the
    unpacking of what they read ([F21])."""

    if TYPE_CHECKING:
        layout: int
        path: str
        _step_sql: str

        async def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...

    def _stored_rows(self, sql: str) -> str:
        """A read of ``entries`` as one of ``log_rows`` in a format-4 file: the stored payloads,
        unpacked in Python (cheaper than the SQL of ``entries`` for every packed one). A
        format-5 file's store reads ``log`` itself (``_sqlite_schema3``)."""
        return sql.replace("FROM entries", "FROM log_rows", 1) if self.layout == 4 else sql

    async def _unpacked_values(self, rows: list[Any]) -> list[Any]:
        """[F21] ``rows`` (one actor's, by seq, column values as read) unpacked in a file of
        format 4 or 5, before they are checked, reading the entries they need that they lack."""
        if self.layout < 4 or not rows:
            return rows
        got, absent = unpack_values(rows, {})
        if absent:
            got, _ = unpack_values(rows, await self._anchors(rows[0][0], absent))
        return got

    async def _unpacked(self, rows: list[EntryRow]) -> list[EntryRow]:
        """:meth:`_unpacked_values` of rows already checked."""
        if self.layout < 4 or not any(r.payload[:1] in FLAG_BYTES for r in rows):
            return rows
        values = await self._unpacked_values([_VALUES(r) for r in rows])
        return [r if v[6] is r.payload else EntryRow(*v) for r, v in zip(rows, values, strict=True)]

    async def _anchors(self, actor_id: Any, seqs: list[int]) -> dict[int, tuple[str, bytes]]:
        """The stored ``(kind, payload)`` of these entries of the actor, by seq (a damaged
        column: left out, nothing to unpack with)."""
        if self.layout >= 5:  # by rowid (``_sqlite_schema3.anchors5``)
            found = await self._fetch(anchors5(len(seqs)), (*seqs, actor_id))
        else:
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

    # -- the log's reads (``Store``), in every layout ------------------------------

    async def read(
        self,
        actor_id: str,
        *,
        after_seq: int = 0,
        upto_seq: int | None = None,
        kinds: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[EntryRow]:
        if self.layout >= 5:
            sql, params = self._read5(actor_id, after_seq, upto_seq, kinds, limit)
        else:
            sql, params = select_entries("sqlite", actor_id, after_seq, upto_seq, kinds, limit)
            sql = self._stored_rows(sql)
        found = await self._fetch(sql, params)  # [F21] unpacked here
        return entries(await self._unpacked_values(found), actor_id, after_seq)

    @staticmethod
    def _read5(
        actor_id: str,
        after_seq: int,
        upto_seq: int | None,
        kinds: Sequence[str] | None,
        limit: int | None,
    ) -> tuple[str, list[Any]]:
        """``read``'s query in a format-5 file: a range of the actor's rowids (seqs beyond
        the format's are past every entry; beyond 64 bits, as in every SQLite file, bad
        input)."""
        for value in (after_seq, upto_seq):
            if value is not None and not -(1 << 63) <= value < 1 << 63:
                raise ConfigurationError(
                    f"SQLite cannot store a value of this read: seq {value} is beyond 64 bits"
                )
        after = min(max(after_seq, 0), MAX_SEQ)
        upto = MAX_SEQ if upto_seq is None else min(max(upto_seq, after), MAX_SEQ)
        params: list[Any] = [after, upto, actor_id]
        if kinds is not None:
            params += [KIND_CODES.get(k, 0) for k in kinds]
        if limit is not None:
            params.append(limit)
        return read5(None if kinds is None else len(kinds), limit is not None), params

    async def find_message(self, actor_id: str, message_id: str) -> EntryRow | None:
        # The index finds the row's seq; its columns are read from the table by its primary
        # key (a plain lookup would take message_id from the index's own copy), so that a key
        # damaged in the index is told apart from the entry it points at.
        if self.layout >= 5:
            found = await self._fetch(MESSAGE5, (message_id, actor_id))
            rows = await self._unpacked_values(found)  # a message is never packed: damage
        else:
            rows = await self._fetch(
                f"SELECT {ENTRY_COLS} FROM entries WHERE actor_id = ? AND seq = "
                "(SELECT seq FROM entries WHERE actor_id = ? AND message_id = ?)",
                (actor_id, actor_id, message_id),
            )
        if not rows:
            return None
        row = entry_row(rows[0], actor_id=actor_id)
        if row.message_id != message_id:
            # a key damaged in the index points at another message's row: answering with
            # it would give this message the other one's reply
            raise StoreCorruptError(
                self.path,
                f"the index entries_message_id finds message id {message_id!r} of actor "
                f"{actor_id!r} at seq {row.seq}, whose message id is {row.message_id!r}",
            )
        return row

    async def message_ids(self, actor_id: str, *, limit: int) -> list[str] | None:
        """``MessageIdIndex``: one scan of the message-id index (None past ``limit``)."""
        sql = (
            MESSAGE_IDS5
            if self.layout >= 5
            else MESSAGE_IDS
            if self.layout >= 3
            else "SELECT message_id FROM entries WHERE actor_id = ? AND message_id IS NOT NULL "
            "LIMIT ?"
        )
        rows = await self._fetch(sql, (actor_id, limit + 1))
        return None if len(rows) > limit else [str(r[0]) for r in rows]

    async def find_ref(self, actor_id: str, kind: str, ref: int) -> list[EntryRow]:
        if self.layout >= 5:  # no step index: the actor's log after ``ref``, as for any kind
            if kind not in KIND_CODES or not 0 <= ref < MAX_SEQ:
                return []
            found = await self._fetch(REF5, (ref, actor_id, KIND_CODES[kind], ref))
            return entries(await self._unpacked_values(found), actor_id, ref)
        if kind == "step":  # the runtime's lookup (a repeated ask): the partial index
            found = await self._fetch(self._stored_rows(self._step_sql), (actor_id, ref, actor_id))
            # [F21] unpacked before the rows are built, as a read's are (one EntryRow each)
            steps = entries(await self._unpacked_values(found), actor_id, ref)
            return sorted(steps, key=lambda r: r.seq)
        else:  # operators' tools: a ref always points back, so scan the log after it
            sql = (
                f"SELECT {ENTRY_COLS} FROM entries "
                "WHERE actor_id = ? AND seq > ? AND kind = ? AND ref = ? ORDER BY seq"
            )
            rows = await self._fetch(sql, (actor_id, ref, kind, ref))
        return await self._unpacked([entry_row(r, actor_id=actor_id, seq=ref + 1) for r in rows])
