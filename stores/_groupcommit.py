"""Group commit without a background task: concurrent appends share one transaction.

The first appender to find no commit in flight becomes the *leader*: it takes every queued
request and commits them together. Requests that arrive meanwhile queue up; when the commit
finishes, leadership passes to the first of them, which commits the whole queue in the next
transaction. So under load each transaction (and each fsync) carries every append that
arrived while the previous one was in flight; with no load an append commits at once. With
``gather`` (SqliteStore) a new leader first lets the other ready tasks run once, so that
appenders woken by the same event (a batch of replies, a burst of messages) join its batch
instead of the next one; ``"when_shared"`` does so only while batches are shared, so a lone
appender (one actor's sequential calls) does not pay the extra turn of the event loop.

A commit, once started, is shielded from cancellation: it is bounded, and abandoning it halfway
would strand the other requests in the batch. A request whose caller is cancelled while it
waits stays queued and may still be committed ("a cancelled append may or may not be
durable"), which the store contract allows.

On asyncio a waiting request parks on a plain future of the loop (``create_future``, woken by
``set_result``), and a gathering leader yields with ``asyncio.sleep(0)``: anyio's ``Event``
costs a backend lookup, an ``asyncio.Event`` and a future per waiter, and at 100 actors every
commit wakes 100 of them (measured: the waiters' events were the larger half of the store's
CPU per append on the loop). On trio (no asyncio loop running) they are ``anyio.Event`` and
anyio's shielded checkpoint, as before. Cancellation is the same on both: a cancel reaches a
waiter as ``CancelledError`` at its ``await``.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

import anyio
import anyio.lowlevel
from actorlog.store import ConfigurationError, report_commit

if TYPE_CHECKING:
    import asyncio

__all__ = ["GroupCommitter", "Request", "require_asyncio"]


def require_asyncio(what: str, driver: str) -> None:
    """A store whose driver (``asyncpg``) hands results to asyncio futures fails deep inside
    trio ("unrecognized yield message"): say so at open instead, and name the store that
    runs on trio.

    Raises:
        ConfigurationError: no asyncio event loop is running in this thread.
    """
    if _running_loop() is None:
        raise ConfigurationError(
            f"{what} runs on asyncio only (its driver, {driver}, is an asyncio library), but "
            "no asyncio loop is running here (trio?). Run under asyncio, e.g. "
            "anyio.run(main, backend='asyncio'), or on trio use SqliteStore (durable, runs "
            "on asyncio and trio) or MemoryStore."
        ) from None


T = TypeVar("T")
Gather = Literal["never", "always", "when_shared"]


class Request(Generic[T]):
    __slots__ = ("abandoned", "done", "error", "item", "lead", "wake")

    def __init__(self, item: T) -> None:
        self.item = item
        #: made only if this request has to wait: a future on asyncio, an event on trio
        self.wake: asyncio.Future[None] | anyio.Event | None = None
        self.lead = False
        self.done = False
        self.abandoned = False
        self.error: BaseException | None = None


class GroupCommitter(Generic[T]):
    """Batches concurrent :meth:`submit` calls into calls of ``commit(batch)``.

    ``commit`` must set ``error`` on each request that failed (and may raise, which fails every
    request of the batch that has no error of its own).
    """

    def __init__(
        self,
        commit: Callable[[Sequence[Request[T]]], Awaitable[None]],
        *,
        on_batch: Callable[[int], None] = report_commit,
        gather: Gather = "never",
        commit_now: Callable[[Request[T]], bool] | None = None,
    ) -> None:
        self._commit = commit
        #: tried first for a leader alone in the queue: commits it without an await (True),
        #: or does nothing (False: ``commit`` does, shielded); the request's ``error`` is
        #: set if it failed
        self._commit_now = commit_now
        #: whether a new leader lets the other ready tasks run once before it takes the
        #: queue, so that appenders woken together share its batch: ``"always"`` (needed
        #: when ``commit`` may not await, as ``SqliteStore(commit_on_loop=True)`` with a lone
        #: request: no one could ever join), ``"when_shared"`` (only after a batch of
        #: several: a lone appender pays nothing), or ``"never"``
        self.gather: Gather = gather
        #: told each batch's size before it is committed (telemetry)
        self._on_batch = on_batch
        self._queue: list[Request[T]] = []
        self._busy = False
        #: sizes of the last batches, for telemetry (bounded)
        self.last_batch_size = 0

    async def submit(self, item: T) -> None:
        req = Request(item)
        self._queue.append(req)
        loop = _running_loop()  # None on trio
        if not self._busy:
            self._busy = True
            req.lead = True
            shared = self.last_batch_size > 1
            if self.gather == "always" or (self.gather == "when_shared" and shared):
                if loop is None:
                    await anyio.lowlevel.cancel_shielded_checkpoint()
                else:
                    try:
                        aio: Any = sys.modules["asyncio"]  # its loop runs
                        await aio.sleep(0)
                    except BaseException:
                        # cancelled while gathering: the queue behind it still needs a
                        # leader (this request may be committed too, which a cancelled
                        # append allows)
                        with anyio.CancelScope(shield=True):
                            await self._lead()
                        raise
        else:
            try:
                if loop is not None:
                    wake: asyncio.Future[None] = loop.create_future()
                    req.wake = wake
                    await wake
                else:
                    event = req.wake = anyio.Event()
                    await event.wait()
            except BaseException:
                if req.lead and not req.done:
                    with anyio.CancelScope(shield=True):
                        await self._lead()
                else:
                    req.abandoned = True
                raise
        if req.lead and not req.done and not self._now(req):
            await self._lead()
        if req.error is not None:
            raise req.error

    def _now(self, req: Request[T]) -> bool:
        """Commit the leader ``req`` at once if it is alone and ``commit_now`` can (no await:
        no cancel scope, nothing for a cancellation to interrupt)."""
        if self._commit_now is None or len(self._queue) != 1:
            return False
        try:
            if not self._commit_now(req):
                return False
        except Exception as exc:  # as ``_lead`` does for ``commit``
            req.error = exc
        self._queue = []
        self.last_batch_size = 1
        self._on_batch(1)
        req.done = True
        self._busy = False
        return True

    async def _lead(self) -> None:
        with anyio.CancelScope(shield=True):
            while True:
                batch, self._queue = self._queue, []
                self.last_batch_size = len(batch)
                self._on_batch(len(batch))
                try:
                    await self._commit(batch)
                except BaseException as exc:
                    for r in batch:
                        if r.error is None:
                            r.error = exc
                    if not isinstance(exc, Exception):
                        self._finish(batch)
                        self._handoff()
                        raise
                self._finish(batch)
                if self._handoff():
                    return
                if not self._queue:
                    self._busy = False
                    return
                # only abandoned requests wait: commit them ourselves

    @staticmethod
    def _finish(batch: Sequence[Request[T]]) -> None:
        for r in batch:
            r.done = True
            if r.wake is not None:
                _wake(r.wake)

    def _handoff(self) -> bool:
        for r in self._queue:
            if not r.abandoned:
                r.lead = True
                if r.wake is not None:
                    _wake(r.wake)
                return True
        if not self._queue:
            self._busy = False
            return True
        return False


def _first_running_loop() -> asyncio.AbstractEventLoop | None:
    """The running asyncio loop, or None (trio, or no loop). asyncio is not imported with
    actorlog (a run on trio never imports it); whatever runs an asyncio loop has imported
    it, and from then on ``_running_loop`` is asyncio's own C lookup (no exception raised)."""
    global _running_loop
    aio = sys.modules.get("asyncio")
    if aio is None:
        return None
    _running_loop = aio._get_running_loop
    return _running_loop()


#: the running asyncio loop, or None (trio)
_running_loop: Callable[[], asyncio.AbstractEventLoop | None] = _first_running_loop


def _wake(wake: asyncio.Future[None] | anyio.Event) -> None:
    if isinstance(wake, anyio.Event):
        wake.set()
    elif not wake.done():  # a cancelled waiter's future is done (cancelled)
        wake.set_result(None)
