"""Reading a SQLite file's pages, to damage it below the rows (https://sqlite.org/fileformat2.html).

Tests use it to flip bits where SQL cannot reach: the serial types in record headers (a BLOB
turned TEXT, an INTEGER turned REAL, without changing the record's length), index pages and
free pages. Only what those tests need: table and index b-tree pages, the freelist, records
without overflow pages.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import attrs
import pytest

LEAF_TABLE, INTERIOR_TABLE, LEAF_INDEX, INTERIOR_INDEX = 0x0D, 0x05, 0x0A, 0x02


def varint(buf: bytes, i: int) -> tuple[int, int]:
    """SQLite's big-endian varint at ``buf[i]``: ``(value, next offset)``."""
    v = 0
    for k in range(8):
        b = buf[i + k]
        v = (v << 7) | (b & 0x7F)
        if not b & 0x80:
            return v, i + k + 1
    return (v << 8) | buf[i + 8], i + 9


@attrs.frozen
class Record:
    """One table row's record: where each column's serial type byte sits in the file."""

    table: str
    rowid: int  # 0 in a WITHOUT ROWID table (the entries table since format 2)
    types: tuple[int, ...]  # serial types, by column
    type_offsets: tuple[int, ...]  # file offset of each serial type's last byte
    #: the values of the first two columns (the primary key ``(actor_id, seq)`` of entries)
    key: tuple[object, ...] = ()


def _value(t: int, body: bytes, i: int) -> tuple[object, int]:
    """The value of serial type ``t`` at ``body[i]``, and the offset after it."""
    sizes = {0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 5: 6, 6: 8, 7: 8, 8: 0, 9: 0}
    if t in sizes:
        n = sizes[t]
        if t in (8, 9):
            return t - 8, i
        if t == 0:
            return None, i
        if t == 7:
            return float("nan"), i + n  # not needed by the tests
        return int.from_bytes(body[i : i + n], "big", signed=True), i + n
    n = (t - 12) // 2 if t % 2 == 0 else (t - 13) // 2
    raw = body[i : i + n]
    return (raw if t % 2 == 0 else raw.decode("utf-8", "replace")), i + n


@attrs.define
class SqliteFile:
    path: Path
    data: bytes
    page_size: int
    roots: dict[str, int]  # table or index name -> root page
    kinds: dict[str, str]  # name -> "table" | "index"
    #: formats 3 to 5 (FORMAT.md section 6): actor key -> actor id. Its log rows are in
    #: ``log`` (also found here as ``entries``, the name of the view over them), whose
    #: records' keys (format 5: rowids) this maps back to ``(actor_id, seq)``; the columns
    #: keep format 2's order
    actor_keys: dict[int, str] = attrs.field(factory=dict)

    @classmethod
    def read(cls, path: Path) -> SqliteFile:
        db = sqlite3.connect(path)
        try:
            rows = db.execute("SELECT name, type, rootpage FROM sqlite_master").fetchall()
            keys: dict[int, str] = {}
            if any(n == "log" for n, _, _ in rows):
                keys = dict(db.execute("SELECT id, actor_id FROM actors").fetchall())
        finally:
            db.close()
        data = path.read_bytes()
        size = int.from_bytes(data[16:18], "big")
        roots = {n: r for n, t, r in rows if r}
        kinds = {n: t for n, t, r in rows if r}
        if keys or "log" in roots:
            roots["entries"], kinds["entries"] = roots["log"], "table"
        return cls(path, data, 65536 if size == 1 else size, roots, kinds, keys)

    def page(self, n: int) -> tuple[int, bytes]:
        """``(file offset of the b-tree header, page bytes)`` of page ``n`` (1-based)."""
        start = (n - 1) * self.page_size
        return (start + (100 if n == 1 else 0)), self.data[start : start + self.page_size]

    def pages_of(self, name: str) -> list[int]:
        """Every page of a table's or index's b-tree (interior and leaf)."""
        out: list[int] = []
        todo = [self.roots[name]]
        while todo:
            n = todo.pop()
            out.append(n)
            hdr, page = self.page(n)
            h = hdr - (n - 1) * self.page_size
            kind = page[h]
            if kind in (INTERIOR_TABLE, INTERIOR_INDEX):
                count = int.from_bytes(page[h + 3 : h + 5], "big")
                todo.append(int.from_bytes(page[h + 8 : h + 12], "big"))
                for c in range(count):
                    ptr = int.from_bytes(page[h + 12 + 2 * c : h + 14 + 2 * c], "big")
                    todo.append(int.from_bytes(page[ptr : ptr + 4], "big"))
        return sorted(out)

    def free_pages(self) -> list[int]:
        """The freelist's trunk and leaf pages."""
        out: list[int] = []
        trunk = int.from_bytes(self.data[32:36], "big")
        while trunk:
            out.append(trunk)
            _, page = self.page(trunk)
            count = int.from_bytes(page[4:8], "big")
            out.extend(int.from_bytes(page[8 + 4 * i : 12 + 4 * i], "big") for i in range(count))
            trunk = int.from_bytes(page[0:4], "big")
        return sorted(out)

    def records(self, table: str) -> list[Record]:
        """The records of a table's leaf pages (those without overflow), in a rowid table
        or a WITHOUT ROWID one (whose rows are kept in an index b-tree)."""
        out = []
        usable = self.page_size - self.data[20]
        for n in self.pages_of(table):
            hdr, page = self.page(n)
            base = (n - 1) * self.page_size
            h = hdr - base
            if page[h] not in (LEAF_TABLE, LEAF_INDEX):
                continue
            count = int.from_bytes(page[h + 3 : h + 5], "big")
            for c in range(count):
                ptr = int.from_bytes(page[h + 8 + 2 * c : h + 10 + 2 * c], "big")
                size, i = varint(page, ptr)
                rowid = 0
                if page[h] == LEAF_TABLE:
                    rowid, i = varint(page, i)
                    if size > usable - 35:
                        continue  # spills to overflow pages
                elif size > ((usable - 12) * 64 // 255) - 23:
                    continue  # an index cell that spills to overflow pages
                header_len, j = varint(page, i)
                types: list[int] = []
                offsets: list[int] = []
                while j < i + header_len:
                    t, k = varint(page, j)
                    types.append(t)
                    offsets.append(base + k - 1)
                    j = k
                key = []
                v = i + header_len
                for t in types[:2]:
                    value, v = _value(t, page, v)
                    key.append(value)
                if table in ("entries", "log") and "log" in self.kinds and rowid:
                    # format 5: the key is the rowid ``actor << 32 | seq`` and the record's
                    # first column (``id``) is NULL; shown in format 2's column order, the
                    # actor's column the id's
                    key = [self.actor_keys.get(rowid >> 32, rowid >> 32), rowid & 0xFFFFFFFF]
                    types.insert(0, types[0])
                    offsets.insert(0, offsets[0])
                elif table in ("entries", "log") and "log" in self.kinds and key:
                    key[0] = self.actor_keys.get(key[0], key[0])  # type: ignore[call-overload]
                out.append(Record(table, rowid, tuple(types), tuple(offsets), tuple(key)))
        return out

    def find(self, name: str, needle: bytes) -> list[int]:
        """File offsets where ``needle`` occurs in the pages of a table's or index's b-tree."""
        out: list[int] = []
        for n in self.pages_of(name):
            base = (n - 1) * self.page_size
            _, page = self.page(n)
            i = page.find(needle)
            while i >= 0:
                out.append(base + i)
                i = page.find(needle, i + 1)
        return out

    def leaf_of(self, table: str, rowid: int) -> int:
        """The leaf page of a table's b-tree that holds the row ``rowid``."""
        for r in self.records(table):
            if r.rowid == rowid:
                return r.type_offsets[0] // self.page_size + 1
        raise LookupError(f"no record {rowid} in {table}")


def flip(path: Path, offset: int, bit: int) -> None:
    """Flip one bit of the file in place."""
    with path.open("r+b") as f:
        f.seek(offset)
        b = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([b ^ (1 << bit)]))


def log_seq(path: Path) -> str:
    """SQL: the seq of a row of ``log`` in this file: its column ``seq`` in formats 3 and 4,
    the low 32 bits of its rowid in format 5 (FORMAT.md section 6)."""
    db = sqlite3.connect(path)
    try:
        ((sql,),) = db.execute("SELECT sql FROM sqlite_master WHERE name = 'log'").fetchall()
    finally:
        db.close()
    return "seq" if "WITHOUT ROWID" in sql else "(id & 4294967295)"


def new_files_in(monkeypatch: pytest.MonkeyPatch, layout: int) -> None:
    """Make ``SqliteStore`` create new files in format ``layout`` (4: format 3's tables, with
    packed payloads), as an earlier version of this code made them; an existing file keeps
    its own layout, as always."""
    from actorlog.stores import _sqlite_schema, sqlite as module

    real = _sqlite_schema.file_layout

    async def file_layout(conn: Any, version: int | None) -> int:
        return layout if version is None else await real(conn, version)

    monkeypatch.setattr(module, "file_layout", file_layout)
