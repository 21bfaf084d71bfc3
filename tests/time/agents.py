"""Actors for the timer tests (also run by the crash worker in a subprocess)."""

from __future__ import annotations

import anyio
import attrs
from actorlog import Actor, Context


@attrs.define
class Nap:
    seconds: float
    label: str


@attrs.define
class Note:
    label: str


@attrs.define
class Later:
    target: str
    label: str
    delay: float


@attrs.define
class Get:
    pass


@attrs.define
class Log:
    items: list[str] = attrs.Factory(list)


class Sleeper(Actor[Log]):
    """Naps durably; notes what it did, in order."""

    snapshot_every = None

    async def receive(self, ctx: Context, msg: Nap | Note | Get) -> list[str]:
        if isinstance(msg, Nap):
            self.state.items.append(f"start:{msg.label}")
            if msg.seconds == -1:  # abandoned by its own scope: logged, never waited for
                with anyio.move_on_after(0.05):
                    await ctx.sleep(3600)
            else:
                await ctx.sleep(msg.seconds)
            self.state.items.append(f"end:{msg.label}")
        elif isinstance(msg, Note):
            self.state.items.append(msg.label)
        return list(self.state.items)


class Recorder(Actor[Log]):
    """Keeps the labels of the notes it gets."""

    snapshot_every = None

    async def receive(self, ctx: Context, msg: Note | Get) -> list[str]:
        if isinstance(msg, Note):
            self.state.items.append(msg.label)
        return list(self.state.items)


class Sender(Actor[Log]):
    """Sends a note to a recorder later, from its step."""

    snapshot_every = None

    async def receive(self, ctx: Context, msg: Later) -> str:
        ref = await ctx.spawn(Recorder, msg.target)
        timer_id = await ctx.send_later(ref, Note(msg.label), delay=msg.delay)
        self.state.items.append(timer_id)
        return timer_id


@attrs.define
class Flood:
    """Put ``n`` timers (due after ``delay``) addressed to this actor, then stop it."""

    n: int
    delay: float = 0.0


class Quitter(Actor[Log]):
    """Floods itself with timers and ends in the same step: they can never be delivered."""

    snapshot_every = None

    async def receive(self, ctx: Context, msg: Flood | Note | Get) -> list[str]:
        if isinstance(msg, Flood):
            me = await ctx.spawn(Quitter, ctx.actor_id)
            for i in range(msg.n):
                await ctx.send_later(me, Note(f"late-{i}"), delay=msg.delay)
            ctx.stop("flooded")
        elif isinstance(msg, Note):
            self.state.items.append(msg.label)
        return list(self.state.items)
