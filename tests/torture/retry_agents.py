"""The actor and tool of ``test_retry_crash.py``, shared by its worker process and the test.

``flaky`` appends one line per run to the file named by ``ACTORLOG_RETRY_RUNS`` (flushed
and fsynced before it raises or returns) and fails its first run; its retry policy waits
``DELAY`` seconds, without jitter, before the next attempt.
"""

from __future__ import annotations

import os

import anyio
import attrs
from actorlog import Actor, Context, Retry, tool

DELAY = 3.0


@attrs.define
class Go:
    what: str


@attrs.define
class Done:
    results: list[str] = attrs.Factory(list)


@tool(
    effect="write",
    idempotent=True,
    retry=Retry(attempts=3, initial=DELAY, factor=1.0, jitter=False),
    name="retry_crash.flaky",
)
async def flaky(what: str, *, idempotency_key: str) -> str:
    n = _note_run(idempotency_key)
    if n == 1:
        raise ConnectionError(f"{what}: the service is down")
    return f"{what} done on run {n}"


def _note_run(idempotency_key: str) -> int:
    """Append this run to the runs file (durably); return its number."""
    with open(os.environ["ACTORLOG_RETRY_RUNS"], "a+", encoding="utf-8") as f:
        f.seek(0)
        n = len(f.read().splitlines()) + 1
        f.write(f"{n} {idempotency_key} pid={os.getpid()}\n")
        f.flush()
        os.fsync(f.fileno())
    return n


class Retrier(Actor[Done]):
    async def receive(self, ctx: Context, msg: Go) -> str:
        got = await ctx.call(flaky, msg.what)
        self.state.results.append(got)
        return got


#: the back-off of the planned tools (seconds): long enough to kill a process during it
PLAN_DELAY = 2.0


def _planned(what: str, idempotency_key: str) -> str:
    """Run number n does what the n-th word of ``ACTORLOG_RETRY_PLAN`` says: ``fail`` (a
    ``ConnectionError``), ``hang`` (until the process is killed) or ``ok``."""
    n = _note_run(idempotency_key)
    plan = os.environ["ACTORLOG_RETRY_PLAN"].split(",")
    todo = plan[n - 1] if n <= len(plan) else "ok"
    if todo == "fail":
        raise ConnectionError(f"{what}: run {n} failed")
    if todo == "hang":
        return "hang"
    return f"{what} ok on run {n}"


_PLAN_RETRY = Retry(attempts=5, initial=PLAN_DELAY, factor=1.0, jitter=False)


@tool(effect="read", retry=_PLAN_RETRY, name="retry_crash.planned_read")
async def planned_read(what: str) -> str:
    got = _planned(what, "no-key")
    if got == "hang":
        await anyio.sleep_forever()
    return got


@tool(effect="write", idempotent=True, retry=_PLAN_RETRY, name="retry_crash.planned_write")
async def planned_write(what: str, *, idempotency_key: str) -> str:
    got = _planned(what, idempotency_key)
    if got == "hang":
        await anyio.sleep_forever()
    return got


class PlannedReader(Actor[Done], name="retry_crash.reader"):
    async def receive(self, ctx: Context, msg: Go) -> str:
        got = await ctx.call(planned_read, msg.what)
        self.state.results.append(got)
        return got


class PlannedWriter(Actor[Done], name="retry_crash.writer"):
    async def receive(self, ctx: Context, msg: Go) -> str:
        got = await ctx.call(planned_write, msg.what)
        self.state.results.append(got)
        return got


PLANNED = {"read": PlannedReader, "write": PlannedWriter}
