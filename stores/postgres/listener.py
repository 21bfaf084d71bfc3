"""The store's one LISTEN connection (PostgreSQL ``LISTEN``/``NOTIFY``), shared by every
channel, outside the pool."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from actorlog.store import StoreError

from .driver import DRIVER_ERRORS, close_quietly

__all__ = ["LISTEN_CONNECT_TIMEOUT", "Listener"]

#: Listener reconnection: first delay, longest delay (seconds), and how often an idle
#: listener connection is checked (a dead peer without a FIN is noticed only by a query).
_RELISTEN_FIRST = 0.05
_RELISTEN_MAX = 5.0
_LISTEN_CHECK_EVERY = 15.0
LISTEN_CONNECT_TIMEOUT = 10.0
_RELISTEN_ERRORS: tuple[type[BaseException], ...] = (StoreError, *DRIVER_ERRORS)


class Listener:
    """The store's one LISTEN connection, shared by every channel (outside the pool).

    A supervisor reconnects after the connection drops, with back-off, LISTENs on every
    channel again, and then calls each callback with ``None``: notifications sent while it was
    down are lost, and callers must look for themselves. An idle connection is probed every
    ``_LISTEN_CHECK_EVERY`` seconds, so that a peer gone without closing the socket is noticed
    too.

    Task ownership: the listener owns everything it runs. The supervisor runs inside a task
    group of the listener's own, hosted by one task the listener starts on first use (the
    store's callers hand it no task group: ``listen_inbox`` returns a stop function); a
    failure of the supervisor ends that task group and is raised by :meth:`close`, which
    cancels the task group and waits for it (asyncpg runs on asyncio only, so the host is an
    asyncio task).

    Args:
        connect: opens a new listening connection (raises ``StoreError`` on failure).
    """

    def __init__(self, connect: Callable[[], Awaitable[Any]]) -> None:
        self._connect = connect
        self._callbacks: dict[str, list[Callable[[str | None], None]]] = {}
        self._conn: Any = None
        self._lost = anyio.Event()
        #: the task hosting the supervisor's task group, and that task group's cancel scope
        self._host: asyncio.Task[None] | None = None
        self._scope: anyio.CancelScope | None = None
        self._closing = False
        #: times the connection was re-established (tests, operators)
        self.reconnects = 0

    def idle(self) -> bool:
        return not self._callbacks

    @property
    def server_pid(self) -> int | None:
        """The backend pid of the listening connection (None while reconnecting)."""
        conn = self._conn
        return None if conn is None or conn.is_closed() else int(conn.get_server_pid())

    async def add(self, channel: str, on_payload: Callable[[str | None], None]) -> None:
        if self._host is None and self._conn is None:
            self._attach(await self._connect())  # the first failure is raised
        new = channel not in self._callbacks
        self._callbacks.setdefault(channel, []).append(on_payload)
        conn = self._conn
        if new and conn is not None:  # None: reconnecting, which listens on every channel
            try:
                await conn.add_listener(channel, self._dispatch)
            except DRIVER_ERRORS:
                self._lost.set()  # the supervisor reconnects and listens on every channel
        if self._host is None and not self._closing:
            self._host = asyncio.get_running_loop().create_task(self._run(), name="actorlog:listen")

    async def remove(self, channel: str, on_payload: Callable[[str | None], None]) -> None:
        callbacks = self._callbacks.get(channel, [])
        if on_payload in callbacks:
            callbacks.remove(on_payload)
        if callbacks:
            return
        self._callbacks.pop(channel, None)
        conn = self._conn
        if self._callbacks:
            if conn is not None and not conn.is_closed():
                with anyio.move_on_after(5, shield=True), contextlib.suppress(*DRIVER_ERRORS):
                    await conn.remove_listener(channel, self._dispatch)
            return
        await self.close()

    async def close(self) -> None:
        """Cancel the supervisor's task group, wait for it, and close the connection
        (bounded). Raises what the supervisor failed with, if it did."""
        self._callbacks.clear()
        self._closing = True
        host, self._host = self._host, None
        try:
            if host is not None:
                if self._scope is not None:
                    self._scope.cancel()
                else:  # not started yet: it will not start
                    host.cancel()
                with anyio.CancelScope(shield=True), contextlib.suppress(asyncio.CancelledError):
                    await host
        finally:
            conn, self._conn = self._conn, None
            if conn is not None:
                await close_quietly(conn)

    async def _run(self) -> None:
        """The host task: the listener's task group, until :meth:`close` cancels it."""
        if self._closing:
            return
        async with anyio.create_task_group() as tg:
            self._scope = tg.cancel_scope
            tg.start_soon(self._supervise, name="actorlog:listen-supervise")

    def _attach(self, conn: Any) -> None:
        self._conn = conn
        self._lost = anyio.Event()
        lost = self._lost
        conn.add_termination_listener(lambda _conn: lost.set())

    def _dispatch(self, _conn: Any, _pid: int, channel: str, payload: str) -> None:
        for cb in list(self._callbacks.get(channel, ())):
            try:
                cb(payload)
            except Exception:  # a callback's bug must not stop the listener
                pass

    async def _supervise(self) -> None:
        while True:
            with anyio.move_on_after(_LISTEN_CHECK_EVERY) as quiet:
                await self._lost.wait()
            if quiet.cancelled_caught:
                conn = self._conn
                try:
                    await conn.execute("SELECT 1", timeout=LISTEN_CONNECT_TIMEOUT)
                    continue
                except DRIVER_ERRORS:
                    pass  # dead: reconnect
            old, self._conn = self._conn, None
            if old is not None:
                old.terminate()
            delay = _RELISTEN_FIRST
            while True:
                new: Any = None
                try:
                    new = await self._connect()
                    for channel in list(self._callbacks):
                        await new.add_listener(channel, self._dispatch)
                    break
                except _RELISTEN_ERRORS:
                    if new is not None:
                        new.terminate()
                    await anyio.sleep(delay)
                    delay = min(delay * 2, _RELISTEN_MAX)
            self._attach(new)
            self.reconnects += 1
            for callbacks in list(self._callbacks.values()):
                for cb in list(callbacks):
                    try:
                        cb(None)  # notifications sent while down are lost: look now
                    except Exception:
                        pass
