"""Ownership across runtimes in PostgreSQL: leases with fencing tokens, the inbox, and
reply notifications (``actorlog.store.LeaseStore`` and ``ReplyStore``; docs/scaling.md).

``PostgresStore`` gets these methods from :class:`LeaseMethods`, which uses the store's pool
through the few members it declares.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import asyncpg
from actorlog.store import ConfigurationError, InboxRow, OrphanRow, StoreError

from .driver import DRIVER_ERRORS
from .listener import LISTEN_CONNECT_TIMEOUT, Listener
from .schema import quote_ident

__all__ = ["INBOX_CHANNEL", "REPLY_CHANNEL", "LeaseMethods"]

#: NOTIFY channel that wakes the owner of an actor with new inbox messages (payload: id).
INBOX_CHANNEL = "actorlog_inbox"
#: NOTIFY channel announcing durable steps of messages that came through the inbox, so that
#: the asking runtime reads the reply at once (payload: JSON ``[[actor_id, message_id], ...]``).
REPLY_CHANNEL = "actorlog_reply"

#: Largest NOTIFY payload we send (PostgreSQL's limit is "shorter than 8000 bytes").
_MAX_PAYLOAD_BYTES = 7900


def _reply_payloads(replies: Sequence[tuple[str, str]]) -> list[str]:
    """Pack ``(actor_id, message_id)`` pairs into JSON-array payloads under the NOTIFY limit.

    Each element is ``[actor_id, message_id]``, or ``[actor_id]`` when the pair alone would be
    too large (the listener then checks every ask waiting on that actor)."""
    payloads: list[str] = []
    items: list[str] = []
    size = 2  # the brackets
    for actor_id, message_id in dict.fromkeys(replies):
        item = json.dumps([actor_id, message_id], ensure_ascii=False, separators=(",", ":"))
        n = len(item.encode())
        if n + 2 > _MAX_PAYLOAD_BYTES:
            item = json.dumps([actor_id], ensure_ascii=False, separators=(",", ":"))
            n = len(item.encode())
        if items and size + 1 + n > _MAX_PAYLOAD_BYTES:
            payloads.append("[" + ",".join(items) + "]")
            items, size = [], 2
        items.append(item)
        size += n + (1 if len(items) > 1 else 0)
    if items:
        payloads.append("[" + ",".join(items) + "]")
    return payloads


def _parse_reply_payload(payload: str) -> list[tuple[str, str | None]]:
    """The pairs of a reply payload; an unreadable one (another version) wakes nobody."""
    try:
        items = json.loads(payload)
    except ValueError:
        return []
    out: list[tuple[str, str | None]] = []
    if not isinstance(items, list):
        return out
    for item in items:
        if isinstance(item, list) and item and isinstance(item[0], str):
            mid = item[1] if len(item) > 1 and isinstance(item[1], str) else None
            out.append((item[0], mid))
    return out


class LeaseMethods:
    """The lease, inbox and reply methods of :class:`~actorlog.stores.PostgresStore`."""

    if TYPE_CHECKING:
        dsn: str
        schema: str | None
        _fences: dict[str, int]
        _listener: Listener | None

        def _open_pool(self) -> Any: ...
        def _writable_pool(self) -> Any: ...
        def _failure(self, what: str, exc: BaseException) -> StoreError | ConfigurationError: ...
        async def _fetch(self, sql: str, *args: Any) -> list[Any]: ...
        async def _execute(self, sql: str, *args: Any) -> None: ...

    # -- ownership: leases, fencing tokens, the inbox (docs/scaling.md) -------------------

    def set_fence(self, actor_id: str, token: int | None) -> None:
        """Carry ``token`` with every later append to ``actor_id`` from this store instance
        (``None``: stop fencing; only once this runtime no longer writes the actor)."""
        if token is None:
            self._fences.pop(actor_id, None)
        else:
            self._fences[actor_id] = token

    async def acquire_lease(self, actor_id: str, owner: str, ttl: float) -> int | None:
        """Take the actor's lease for ``ttl`` seconds if it is free, expired or already
        ``owner``'s; return the new fencing token (the previous one + 1), or None if another
        owner holds a live lease. Expiry uses the database's clock.

        Takes the actor's row lock (as appends do), so an append fenced with the old token
        that commits after this returns is rejected.
        """
        pool = self._writable_pool()
        try:
            async with pool.acquire() as conn, conn.transaction():
                await conn.execute("SELECT 1 FROM actors WHERE actor_id = $1 FOR UPDATE", actor_id)
                token = await conn.fetchval(
                    "INSERT INTO leases AS l (actor_id, owner, expires_at, token) "
                    "VALUES ($1, $2, now() + make_interval(secs => $3), 1) "
                    "ON CONFLICT (actor_id) DO UPDATE SET owner = EXCLUDED.owner, "
                    "expires_at = EXCLUDED.expires_at, token = l.token + 1 "
                    "WHERE l.owner IS NULL OR l.expires_at <= now() OR l.owner = EXCLUDED.owner "
                    "RETURNING l.token",
                    actor_id,
                    owner,
                    float(ttl),
                )
        except DRIVER_ERRORS as exc:
            raise self._failure("acquire_lease", exc) from exc
        return None if token is None else int(token)

    async def renew_lease(self, actor_id: str, owner: str, token: int, ttl: float) -> bool:
        """Extend the lease to now + ``ttl`` if ``owner`` still holds it with ``token``.
        False if another runtime took it over (an expired lease nobody took is renewed)."""
        return actor_id in await self.renew_leases(owner, {actor_id: token}, ttl)

    async def renew_leases(self, owner: str, tokens: Mapping[str, int], ttl: float) -> set[str]:
        """Renew many leases in one statement; return the ids whose lease was renewed."""
        if not tokens:
            return set()
        pool = self._writable_pool()
        try:
            rows = await pool.fetch(
                "UPDATE leases AS l SET expires_at = now() + make_interval(secs => $4) "
                "FROM unnest($2::text[], $3::bigint[]) AS u(actor_id, token) "
                "WHERE l.actor_id = u.actor_id AND l.token = u.token AND l.owner = $1 "
                "RETURNING l.actor_id",
                owner,
                list(tokens),
                list(tokens.values()),
                float(ttl),
            )
        except DRIVER_ERRORS as exc:
            raise self._failure("renew_leases", exc) from exc
        return {r[0] for r in rows}

    async def release_lease(self, actor_id: str, owner: str, token: int) -> None:
        """Give the lease up at once (the token stays: the next owner gets token + 1)."""
        await self._execute(
            "UPDATE leases SET owner = NULL, expires_at = now() "
            "WHERE actor_id = $1 AND owner = $2 AND token = $3",
            actor_id,
            owner,
            token,
        )

    async def get_lease(self, actor_id: str) -> tuple[str | None, int, float] | None:
        """``(owner, token, seconds until expiry)`` (owner None or seconds <= 0: free), or
        None if the actor never had a lease."""
        rows = await self._fetch(
            "SELECT owner, token, EXTRACT(EPOCH FROM expires_at - now())::float8 "
            "FROM leases WHERE actor_id = $1",
            actor_id,
        )
        if not rows:
            return None
        return rows[0][0], int(rows[0][1]), float(rows[0][2])

    async def list_leases(self) -> list[tuple[str, str | None, int, float]]:
        """Every lease: ``(actor_id, owner, token, seconds until expiry)`` by actor id
        (owner None or seconds <= 0: free)."""
        rows = await self._fetch(
            "SELECT actor_id, owner, token, EXTRACT(EPOCH FROM expires_at - now())::float8 "
            "FROM leases ORDER BY actor_id"
        )
        return [(r[0], r[1], int(r[2]), float(r[3])) for r in rows]

    async def orphans(self, limit: int = 100, owner: str | None = None) -> list[OrphanRow]:
        """``(actor_id, actor_type)`` of actors with unfinished work (unhandled messages or
        inbox messages) and no live lease: a dead runtime's actors, or never placed. With
        ``owner``, also those whose live lease ``owner`` holds (a runtime restarted under the
        same name after a crash)."""
        rows = await self._fetch(
            "SELECT a.actor_id, a.actor_type FROM actors a "
            "LEFT JOIN leases l ON l.actor_id = a.actor_id "
            "WHERE (l.actor_id IS NULL OR l.owner IS NULL OR l.expires_at <= now() "
            "       OR l.owner = $2) "
            "AND (a.handled_seq < a.last_message_seq "
            "     OR EXISTS (SELECT 1 FROM inbox i WHERE i.actor_id = a.actor_id)) "
            "ORDER BY random() LIMIT $1",
            limit,
            owner,
        )
        return [OrphanRow(r[0], r[1]) for r in rows]

    async def inbox_put(
        self, actor_id: str, message_id: str, type_tag: str, body: str, sender: str | None
    ) -> tuple[str, str] | None:
        """Durably queue a message for the actor's owner (once per message id) and notify.
        A message queued already under this id is returned (``(type_tag, body)``; nothing
        written): one statement, whose snapshot does not see the row it inserts."""
        pool = self._writable_pool()
        try:
            async with pool.acquire() as conn, conn.transaction():
                queued = await conn.fetchrow(
                    "WITH put AS (INSERT INTO inbox (actor_id, message_id, type_tag, body, "
                    "sender) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING RETURNING 1) "
                    "SELECT type_tag, body FROM inbox WHERE actor_id = $1 AND message_id = $2 "
                    "AND NOT EXISTS (SELECT 1 FROM put)",
                    actor_id,
                    message_id,
                    type_tag,
                    body,
                    sender,
                )
                await conn.execute("SELECT pg_notify($1, $2)", INBOX_CHANNEL, actor_id)
        except DRIVER_ERRORS as exc:
            raise self._failure("inbox_put", exc) from exc
        if queued is None:
            return None
        return str(queued[0]), str(queued[1])

    async def inbox_for(self, owner: str, limit: int = 500) -> list[InboxRow]:
        """Queued messages of actors whose lease ``owner`` holds, oldest first:
        ``(actor_id, message_id, type_tag, body, sender)``."""
        rows = await self._fetch(
            "SELECT i.actor_id, i.message_id, i.type_tag, i.body, i.sender FROM inbox i "
            "JOIN leases l ON l.actor_id = i.actor_id WHERE l.owner = $1 ORDER BY i.id LIMIT $2",
            owner,
            limit,
        )
        return [InboxRow(r[0], r[1], r[2], r[3], r[4]) for r in rows]

    async def inbox_delete(self, actor_id: str, message_id: str) -> None:
        """Drop a queued message once it is in the actor's log."""
        await self._execute(
            "DELETE FROM inbox WHERE actor_id = $1 AND message_id = $2", actor_id, message_id
        )

    async def listen_inbox(self, callback: Callable[[str], None]) -> Callable[[], Awaitable[None]]:
        """Call ``callback(actor_id)`` on every inbox notification. Returns an async function
        that stops listening. Notifications can be lost (connection drops): owners poll as
        well. Shares the store's one listener connection with :meth:`listen_replies`."""

        def on_payload(payload: str | None) -> None:
            if payload is not None:
                callback(payload)

        return await self._listen(INBOX_CHANNEL, on_payload)

    async def notify_replies(self, replies: Sequence[tuple[str, str]]) -> None:
        """Announce that the steps of these ``(actor_id, message_id)`` messages are durable
        (``NOTIFY actorlog_reply``), so that runtimes waiting on them read their replies now.

        Call it only once the steps are durable: a notification is a promise that the log
        holds the reply. One statement (one transaction) for the whole batch; pairs are packed
        into as few payloads as NOTIFY's 8000-byte limit allows."""
        payloads = _reply_payloads(replies)
        if not payloads:
            return
        pool = self._writable_pool()
        try:
            await pool.execute(
                "SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p", REPLY_CHANNEL, payloads
            )
        except DRIVER_ERRORS as exc:
            raise self._failure("notify_replies", exc) from exc

    async def listen_replies(
        self, callback: Callable[[str | None, str | None], None]
    ) -> Callable[[], Awaitable[None]]:
        """Call ``callback(actor_id, message_id)`` for every reply announced with
        :meth:`notify_replies` (by any runtime on this database). ``message_id`` is None when
        it did not fit in a notification: any message of the actor may have its reply.
        ``callback(None, None)`` after the listener reconnected: notifications may have been
        lost meanwhile, so every waiting ask should look at the log. Returns an async function
        that stops listening."""

        def on_payload(payload: str | None) -> None:
            if payload is None:
                callback(None, None)
                return
            for actor_id, message_id in _parse_reply_payload(payload):
                callback(actor_id, message_id)

        return await self._listen(REPLY_CHANNEL, on_payload)

    async def _listen(
        self, channel: str, on_payload: Callable[[str | None], None]
    ) -> Callable[[], Awaitable[None]]:
        self._open_pool()
        if self._listener is None:
            self._listener = Listener(self._listen_connect)
        listener = self._listener
        await listener.add(channel, on_payload)

        async def stop() -> None:
            await listener.remove(channel, on_payload)
            if listener.idle() and self._listener is listener:
                self._listener = None

        return stop

    async def _listen_connect(self) -> Any:
        settings = {"search_path": quote_ident(self.schema)} if self.schema else {}
        settings["application_name"] = "actorlog-listen"
        try:
            return await asyncpg.connect(
                self.dsn, server_settings=settings, timeout=LISTEN_CONNECT_TIMEOUT
            )
        except DRIVER_ERRORS as exc:
            raise self._failure("listen", exc) from exc
