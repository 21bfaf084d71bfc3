"""The actor and tool of ``test_retry_crash.py``, shared by its worker process and the test.

``flaky`` appends one line per run to the file named by ``ACTORLOG_RETRY_RUNS`` (flushed
and fsynced before it raises or returns) and fails its first run; its retry policy waits
``DELAY`` seconds, without jitter, before the next attempt.
"""

from __future__ import annotations

import os

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
