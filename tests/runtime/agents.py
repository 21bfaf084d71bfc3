"""Small actors and tools shared by the runtime tests."""

from __future__ import annotations

from typing import Any

import anyio
import attrs
from actorlog import Actor, Context, Happened, NotHappened, tool


@attrs.define
class Ask:
    question: str


@attrs.define
class Add:
    n: int


@attrs.define
class Other:
    x: int = 0


@attrs.define
class Notes:
    answers: list[str] = attrs.Factory(list)
    total: int = 0


class Calls:
    """Counts tool executions across system restarts (the 'outside world')."""

    def __init__(self) -> None:
        self.log: list[tuple[str, Any]] = []
        self.hang: set[str] = set()
        self.started = anyio.Event()
        self.reconcile_answer: Any = None

    def reset(self) -> None:
        self.__init__()  # type: ignore[misc]  # reuse the initializer to reset state

    async def maybe_hang(self, name: str) -> None:
        """Block forever inside tool ``name`` if asked to (simulates a crash mid-tool)."""
        if name in self.hang:
            self.started.set()
            await anyio.sleep_forever()

    def count(self, name: str) -> int:
        return sum(1 for n, _ in self.log if n == name)


CALLS = Calls()


@tool(effect="read")
async def search(q: str) -> str:
    CALLS.log.append(("search", q))
    return f"found:{q}"


@tool(effect="write", idempotent=True)
async def charge(amount: int, *, idempotency_key: str) -> str:
    CALLS.log.append(("charge", idempotency_key))
    await CALLS.maybe_hang("charge")
    return f"charged {amount}"


@tool(effect="write")
async def send_email(to: str) -> str:
    CALLS.log.append(("send_email", to))
    await CALLS.maybe_hang("send_email")
    return f"sent to {to}"


async def _reconcile(key: str, args: dict[str, Any]) -> Happened | NotHappened | None:
    CALLS.log.append(("reconcile", key))
    answer = CALLS.reconcile_answer
    if answer == "happened":
        return Happened(f"already paid {args['amount']}")
    if answer == "not":
        return NotHappened()
    return None


@tool(effect="write", reconcile=_reconcile)
async def pay(amount: int) -> str:
    CALLS.log.append(("pay", amount))
    await CALLS.maybe_hang("pay")
    return f"paid {amount}"


@tool(effect="read")
async def slow_read(q: str) -> str:
    CALLS.log.append(("slow_read", q))
    await CALLS.maybe_hang("slow_read")
    return f"read:{q}"


@tool(effect="read")
async def failing(q: str) -> str:
    CALLS.log.append(("failing", q))
    raise RuntimeError(f"no luck with {q}")


class Researcher(Actor[Notes]):
    snapshot_every = None

    async def receive(self, ctx: Context, msg: Ask | Add) -> str:
        if isinstance(msg, Add):
            self.state.total += msg.n
            return str(self.state.total)
        if msg.question == "boom":
            raise ValueError("bad question")
        found = await ctx.call(search, msg.question)
        self.state.answers.append(found)
        await ctx.call(charge, len(self.state.answers))
        return found


class Blocker(Actor[Notes]):
    """Step: search, then the tool named by the question's prefix (which may hang)."""

    snapshot_every = None

    async def receive(self, ctx: Context, msg: Ask) -> str:
        first = await ctx.call(search, msg.question)
        self.state.answers.append(first)
        kind = msg.question.split(":")[0]
        second: str
        if kind == "read":
            second = await ctx.call(slow_read, msg.question)
        elif kind == "charge":
            second = await ctx.call(charge, 7)
        elif kind == "email":
            second = await ctx.call(send_email, msg.question)
        elif kind == "pay":
            second = await ctx.call(pay, 5)
        else:
            second = "none"
        self.state.answers.append(second)
        return second
