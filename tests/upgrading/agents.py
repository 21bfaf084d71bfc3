"""One researcher, three versions of its handler (docs/upgrading.md's worked upgrade).

``ResearcherV1`` is the code that recorded ``fixtures/researcher_v1.jsonl`` (an ``actorlog
export``, made by ``make_fixture.py``). ``ResearcherV2`` adds a ``lookup`` call behind a version
gate; ``ResearcherUngated`` adds it without one. All three are the same actor class in the log
(tag ``upgrade.researcher``; a ``name=`` belongs to one class, so the other two set the tag
directly): each test runs one of them.
"""

from __future__ import annotations

import anyio
import attrs
from actorlog import Actor, Context, message, tool

#: every tool run, in order (a replay runs none)
CALLS: list[str] = []
#: questions whose search hangs (once each): an actor caught mid-step by a shutdown
HANG_ONCE: set[str] = set()


@message(name="upgrade.question")
@attrs.frozen
class Question:
    q: str


@attrs.define
class Notes:
    answers: list[str] = attrs.Factory(list)


@tool(effect="read", name="upgrade.search")
async def search(q: str) -> str:
    CALLS.append(f"search:{q}")
    if q in HANG_ONCE:
        HANG_ONCE.discard(q)
        await anyio.sleep_forever()
    return f"found {q}"


@tool(effect="read", name="upgrade.lookup")
async def lookup(q: str) -> str:
    CALLS.append(f"lookup:{q}")
    return f"details of {q}"


class ResearcherV1(Actor[Notes]):
    """Yesterday's code: one search per question."""

    __actorlog_tag__ = "upgrade.researcher"  # the same class in the log as ResearcherV2

    async def receive(self, ctx: Context, msg: Question) -> str:
        found = await ctx.call(search, msg.q)
        self.state.answers.append(found)
        return found


class ResearcherV2(Actor[Notes], name="upgrade.researcher"):
    """Today's code: a lookup after the search, behind a version gate."""

    async def receive(self, ctx: Context, msg: Question) -> str:
        found = await ctx.call(search, msg.q)
        if ctx.version("add-lookup", default=1, max=2) >= 2:
            found += " + " + await ctx.call(lookup, msg.q)
        self.state.answers.append(found)
        return found


class ResearcherUngated(Actor[Notes]):
    """Today's code without the gate: replaying yesterday's steps diverges."""

    __actorlog_tag__ = "upgrade.researcher"

    async def receive(self, ctx: Context, msg: Question) -> str:
        found = await ctx.call(search, msg.q)
        found += " + " + await ctx.call(lookup, msg.q)
        self.state.answers.append(found)
        return found


#: the keys ``charge`` ran with, in order; ``charge`` of a question in ``KILL_IN_CHARGE``
#: kills its process (SIGKILL) while it runs: the intent is logged, no result
KEYS: list[str] = []
KILL_IN_CHARGE: set[str] = set()


@tool(effect="write", idempotent=True, name="upgrade.charge")
async def charge(q: str, *, idempotency_key: str) -> str:
    KEYS.append(idempotency_key)
    if q in KILL_IN_CHARGE:
        import os
        import signal

        os.kill(os.getpid(), signal.SIGKILL)
    return f"charged {q}"


class Payer(Actor[Notes], name="upgrade.payer"):
    """Recorded ``fixtures/payer_before_incarnations.jsonl`` (``make_keys_fixture.py``) with
    the code from before incarnation ids (FORMAT.md [F13]): its keys have none."""

    async def receive(self, ctx: Context, msg: Question) -> str:
        done = await ctx.call(charge, msg.q)
        self.state.answers.append(done)
        return done
