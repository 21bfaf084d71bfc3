"""Agents the console tests run: a chatty one for live pages, a hostile one for escaping."""

from __future__ import annotations

import attrs
from actorlog import Actor, Context, tool

#: markup, quotes, an HTML entity, a bidi override, emoji and a very long tail
HOSTILE_TEXT = (
    '<script>alert("xss")</script><img src=x onerror=alert(1)> "\' &amp; '
    "\u202egnp.exe ünïcødé 😀 " + "L" * 5000
)

#: actor ids a web page must show as text: markup, quotes, unicode, very long
HOSTILE_IDS = (
    '<script>alert("id")</script>',
    "\"quoted' & <b>bold</b>",
    "ünï\u202ecødé-😀",
    "long-" + "x" * 190,
)


@attrs.define
class Say:
    text: str


@attrs.define
class Lines:
    said: list[str] = attrs.Factory(list)


@tool(effect="read", name="echo<tool>")
async def echo(text: str) -> str:
    return f"<echo>{text}</echo>"


class Chat(Actor[Lines]):
    async def receive(self, ctx: Context, msg: Say) -> str:
        said = await ctx.call(echo, msg.text[:100])
        self.state.said.append(said)
        return said


class Spiky(Actor[Lines]):
    """Replies with what it was sent; raises an error carrying hostile text on ``raise``."""

    async def receive(self, ctx: Context, msg: Say) -> str:
        said = await ctx.call(echo, msg.text)
        if msg.text == "raise":
            raise ValueError(HOSTILE_TEXT)
        self.state.said.append(said)
        return said
