"""``R`` and the v1 actor that handles it (see ``_qr_agents``)."""

from __future__ import annotations

import attrs
from actorlog import Actor, Context, message

from ._qr_agents import Q, Seen, write


@message(name="qr.r")
@attrs.frozen
class R:
    text: str


class V1(Actor[Seen]):
    """Yesterday's code: ``Q`` and ``R``; an ``R`` writes through an idempotent tool."""

    __actorlog_tag__ = "qr.actor"  # the same actor class in the log as V2

    async def receive(self, ctx: Context, msg: Q | R) -> str:
        if isinstance(msg, R):
            done = await ctx.call(write, msg.text)
            self.state.texts.append(msg.text)
            return done
        self.state.texts.append(msg.text)
        return f"q {msg.text} after {len(self.state.texts) - 1}"


class V1Raises(Actor[Seen]):
    """A v1 whose ``R`` handler now raises before its write (a changed handler)."""

    __actorlog_tag__ = "qr.actor"

    async def receive(self, ctx: Context, msg: Q | R) -> str:
        if isinstance(msg, R):
            raise ValueError(f"cannot handle {msg.text} any more")
        self.state.texts.append(msg.text)
        return f"q {msg.text} after {len(self.state.texts) - 1}"
