"""Agents whose steps run effects concurrently (issue 25), shared by
tests/runtime/test_concurrent_steps.py and its SIGKILL worker."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import attrs
from actorlog import Actor, Context, tool

#: the file the tools append "start ARG" / "done ARG" lines to, and the start to kill at
LEDGER: dict[str, Any] = {"path": None, "kill_at": 0, "starts": 0}


def _note(line: str) -> None:
    path = LEDGER["path"]
    if path is None:
        return
    with Path(path).open("a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


@tool(effect="write", idempotent=True, name="conc.work")
async def work(arg: str, delay: float, *, idempotency_key: str) -> str:
    """A write that takes ``delay`` seconds; SIGKILLs its process at the chosen start."""
    _note(f"start {arg} {idempotency_key}")
    LEDGER["starts"] += 1
    if LEDGER["starts"] == LEDGER["kill_at"]:
        os.kill(os.getpid(), signal.SIGKILL)
    await anyio.sleep(delay)
    _note(f"done {arg} {idempotency_key}")
    return f"w-{arg}"


@attrs.define
class Fan:
    tasks: int = 4


@attrs.define
class Results:
    got: list[str] = attrs.Factory(list)


def delay_of(i: int, step: int) -> float:
    """A different finishing order than the starting order, different per call."""
    return 0.01 * ((3 * i + 2 * step) % 5)


class FanOut(Actor[Results]):
    """The issue's example: N tasks of a task group, each two dependent calls."""

    snapshot_every = None

    async def receive(self, ctx: Context, msg: Fan) -> list[str]:
        got: list[str] = []

        async def one(i: int) -> None:
            a = await ctx.call(work, f"a{i}", delay_of(i, 0))
            b = await ctx.call(work, f"b{i}-" + a, delay_of(i, 1))
            got.append(b)

        async with anyio.create_task_group() as tg:
            for i in range(msg.tasks):
                tg.start_soon(one, i)
        self.state.got.extend(sorted(got))
        return sorted(got)


def expected(tasks: int = 4) -> list[str]:
    return sorted(f"w-b{i}-w-a{i}" for i in range(tasks))
