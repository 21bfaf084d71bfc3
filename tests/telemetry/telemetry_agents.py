"""Actors and tools for the telemetry tests (and the Phoenix end-to-end worker)."""

from __future__ import annotations

from typing import Any

import anyio
import attrs
from actorlog import Actor, Context, Happened, NotHappened, tool


@attrs.define
class Ask:
    question: str


@attrs.define
class Forward:
    question: str


@attrs.define
class Notes:
    answers: list[str] = attrs.Factory(list)


class Calls:
    """What the outside world saw, across restarts within one test."""

    def __init__(self) -> None:
        self.log: list[tuple[str, Any]] = []
        self.hang: set[str] = set()
        self.started = anyio.Event()
        self.reconcile_answer: str | None = None
        self.diverge = False

    def reset(self) -> None:
        self.log = []
        self.hang = set()
        self.started = anyio.Event()
        self.reconcile_answer = None
        self.diverge = False

    async def maybe_hang(self, name: str) -> None:
        if name in self.hang:
            self.started.set()
            await anyio.sleep_forever()


CALLS = Calls()


@tool(effect="read", name="search")
async def search(q: str) -> str:
    CALLS.log.append(("search", q))
    return f"found:{q}"


@tool(effect="read", name="slow_read")
async def slow_read(q: str) -> str:
    CALLS.log.append(("slow_read", q))
    await CALLS.maybe_hang("slow_read")
    return f"read:{q}"


@tool(effect="write", idempotent=True, name="charge")
async def charge(amount: int, *, idempotency_key: str) -> str:
    CALLS.log.append(("charge", idempotency_key))
    await CALLS.maybe_hang("charge")
    return f"charged {amount}"


@tool(effect="write", name="send_email")
async def send_email(to: str) -> str:
    CALLS.log.append(("send_email", to))
    await CALLS.maybe_hang("send_email")
    return f"sent to {to}"


async def _reconcile(key: str, args: dict[str, Any]) -> Happened | NotHappened | None:
    CALLS.log.append(("reconcile", key))
    if CALLS.reconcile_answer == "happened":
        return Happened(f"already paid {args['amount']}")
    if CALLS.reconcile_answer == "not":
        return NotHappened()
    return None


@tool(effect="write", reconcile=_reconcile, name="pay")
async def pay(amount: int) -> str:
    CALLS.log.append(("pay", amount))
    await CALLS.maybe_hang("pay")
    return f"paid {amount}"


class Researcher(Actor[Notes]):
    """Each step: a read, then the tool named by the question's prefix (which may hang)."""

    snapshot_every = None

    async def receive(self, ctx: Context, msg: Ask) -> str:
        if msg.question == "boom":
            raise ValueError("bad question")
        first = await ctx.call(search, msg.question)
        if CALLS.diverge:
            await ctx.call(search, "something else")
        self.state.answers.append(first)
        kind = msg.question.split(":")[0]
        second = "none"
        if kind == "read":
            second = await ctx.call(slow_read, msg.question)
        elif kind == "charge":
            second = await ctx.call(charge, 7)
        elif kind == "email":
            second = await ctx.call(send_email, msg.question)
        elif kind == "pay":
            second = await ctx.call(pay, 5)
        self.state.answers.append(second)
        return f"{first}|{second}"


class Relay(Actor[Notes]):
    """Forwards a question to the researcher ``r`` with ctx.send."""

    snapshot_every = None

    async def receive(self, ctx: Context, msg: Forward) -> None:
        target = await ctx.spawn(Researcher, "r")
        await ctx.send(target, Ask(msg.question))


# -- the end-to-end agent (tests/telemetry/telemetry_worker.py) ------------------------------


@attrs.define
class Job:
    name: str


@attrs.define
class Published:
    done: list[str] = attrs.Factory(list)


#: the job whose publish call hangs (set by the worker from its command line)
HANG_AT: dict[str, str] = {}


@tool(effect="read", name="lookup")
async def lookup(name: str) -> str:
    return f"facts about {name}"


@tool(effect="write", idempotent=True, name="publish")
async def publish(name: str, text: str, *, idempotency_key: str) -> str:
    if HANG_AT.get("job") == name:
        print("HANGING", idempotency_key, flush=True)
        await anyio.sleep_forever()
    return f"published {name} ({idempotency_key})"


class Writer(Actor[Published]):
    """Each job: look something up, note the time, publish (an idempotent write)."""

    snapshot_every = 3

    async def receive(self, ctx: Context, msg: Job) -> str:
        facts = await ctx.call(lookup, msg.name)
        ctx.now()
        receipt = await ctx.call(publish, msg.name, facts)
        self.state.done.append(msg.name)
        return receipt
