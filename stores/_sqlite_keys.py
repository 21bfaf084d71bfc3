"""Format 4's appends straight into ``log`` (FORMAT.md section 6): the file's keys of actor
ids and tags, known to the store, so that a commit need not go through the view ``entries``.

A format-3/4 file keeps the log in ``log``, each row keyed by its actor's integer key
(``actors.id``) and its tag's (``tags.id``), the kind as a code and the checksum as a signed
32-bit integer; the view ``entries`` shows them as text, and its ``INSTEAD OF INSERT``
trigger turns a row written as text into those columns (inserting a new tag first). That
trigger costs each row two lookups, a tag insert that does nothing, and the trigger program
itself. In a format-4 file the store inserts its rows into ``log`` itself, with the same
values the trigger would store (the same bytes: tests/stores/test_sqlite_format4.py), when it
knows the key of each row's actor and tag; otherwise (an actor's or a tag's first append
since the store opened, a value the runtime never writes) through the view as before, and
then reads the new keys (as the trigger reads them). The checks stay in the file's own
triggers on ``log``: the seq chain (``log_contiguous``) and the summary (``log_summary``).

A known key is always right: a tag's never changes (tags are never deleted), and an actor's
changes only if its ``actors`` row is deleted (``delete_actor``, which forgets every actor's
key) and made again; the store holds the file's write lock, so no other writer deletes one.
A refused commit forgets the keys of its actors as well.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from actorlog.store import AuditRow, EntryRow

from ._audit import SqliteAudit
from ._sqlite_schema3 import KIND_CODES, LOG_COLS

__all__ = ["LogKeys", "log_insert_sql", "lookup"]

#: an append request's item: actor id, the seq it expects last, its rows
_Item = tuple[str, int, Sequence[EntryRow]]

#: the multi-row INSERT of n rows straight into ``log``, by n (built once per size)
_LOG_INSERTS: dict[int, str] = {}

#: a checksum's range (unsigned 32 bits) and the bit that makes it negative when stored
_U32, _SIGN = 1 << 32, 1 << 31


def log_insert_sql(n: int) -> str:
    sql = _LOG_INSERTS.get(n)
    if sql is None:
        sql = f"INSERT INTO log ({LOG_COLS}) VALUES " + ",".join(["(?,?,?,?,?,?,?,?)"] * n)
        if len(_LOG_INSERTS) < 512:  # bounded: sizes beyond are built each time
            _LOG_INSERTS[n] = sql
    return sql


def lookup(unknown: tuple[list[str], list[str]]) -> tuple[str, list[str]]:
    """The query of the keys of these actor ids and tags: rows ``(0, actor_id, id)`` and
    ``(1, tag, id)``, found as the view's insert trigger finds them."""
    actors, tags = unknown
    sql = (
        "SELECT 0, actor_id, id FROM actors WHERE actor_id IN ("
        + ",".join("?" * len(actors))
        + ") UNION ALL SELECT 1, tag, id FROM tags WHERE tag IN ("
        + ",".join("?" * len(tags))
        + ")"
    )
    return sql, [*actors, *tags]


class LogKeys(SqliteAudit):
    """The keys of ``SqliteStore`` (mixed in; ``_actor_keys`` and ``_tag_keys`` are made by
    ``_sqlite_commit.SqliteCommits._init_commits``)."""

    _actor_keys: dict[str, int]
    _tag_keys: dict[str, int]

    def _log_values(self, items: Sequence[_Item]) -> list[Any] | None:
        """The parameters of the rows of ``items`` as columns of ``log``, as the view's
        insert trigger makes them, or None if a key is not known yet or a value is not one
        the runtime writes (then the view stores them, with its rules for anything)."""
        actors, tags, kinds = self._actor_keys, self._tag_keys, KIND_CODES
        out: list[Any] = []
        add = out.extend
        try:
            for actor_id, _, rows in items:
                actor = actors.get(actor_id)
                if actor is None:
                    return None
                for r in rows:
                    kind = kinds.get(r.kind)
                    tag = tags.get(r.type_tag)
                    c = r.checksum
                    if kind is None or tag is None or type(c) is not int or not 0 <= c < _U32:
                        return None
                    signed = c - _U32 if c >= _SIGN else c
                    add((actor, r.seq, kind, tag, r.ref, r.message_id, r.payload, signed))
        except TypeError:  # an unhashable actor id, kind or tag: the view's rules
            return None
        return out

    def _unknown(self, items: Sequence[_Item]) -> tuple[list[str], list[str]] | None:
        """The actor ids and tags of ``items`` (text only) whose keys are not known."""
        actors, tags = self._actor_keys, self._tag_keys
        new_actors: set[str] = set()
        new_tags: set[str] = set()
        for actor_id, _, rows in items:
            if type(actor_id) is str and actor_id not in actors:
                new_actors.add(actor_id)
            for r in rows:
                if type(r.type_tag) is str and r.type_tag not in tags:
                    new_tags.add(r.type_tag)
        if not new_actors and not new_tags:
            return None
        return sorted(new_actors), sorted(new_tags)

    def _learn(self, found: Sequence[Any]) -> None:
        """Keep the keys :func:`lookup` read (integers only: anything else, damage, is left
        to the view, which reads it for every row)."""
        for which, name, key in found:
            if type(name) is str and type(key) is int:
                (self._tag_keys if which else self._actor_keys)[name] = key

    def _forget(self, items: Sequence[_Item]) -> None:
        """Forget the keys of the actors of ``items`` (a refused commit: the next try goes
        through the view, and reads them again)."""
        for actor_id, _, _ in items:
            with contextlib.suppress(TypeError):
                self._actor_keys.pop(actor_id, None)

    async def delete_actor(self, actor_id: str, detail: str) -> AuditRow:
        # its ``actors`` row goes, and a new actor may get its key: every key is read again
        self._actor_keys.clear()
        try:
            return await super().delete_actor(actor_id, detail)
        finally:
            self._actor_keys.clear()
