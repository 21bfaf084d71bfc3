"""An agent's tokens streamed to the browser over Server-Sent Events; a crash resumes the answer.

Run it (one process: the web app and the actors share it, on a SQLite file):

    python examples/sse_chat/app.py            # then open http://127.0.0.1:8000/

Ask a question, kill the process mid-answer (``kill -9``), start it again: the page's
EventSource reconnects by itself, asks again with the same message id, and the answer goes on
where it was, with no text shown twice or lost (docs/streaming.md, "Streaming to a browser").

The "model" is scripted (offline, no API key): it streams a canned answer, a token every
``--delay`` seconds. With pydantic-ai, the agent would be ``DurableAgent(agent,
emit_deltas=True)`` run in the handler, and the page would rebuild the text by the keys of its
``"pydantic_ai.delta"`` events instead of by event number (see ``index.html``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import re
from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import actorlog
import anyio
import attrs
import uvicorn
from actorlog import Actor, ActorSystem, Context, tool
from actorlog.errors import ActorlogError, ConfigurationError
from actorlog.stores import SqliteStore
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

HERE = Path(__file__).parent


# -- the model: scripted, streamed token by token ---------------------------------------------


class ScriptedModel:
    """Stands in for an LLM: streams a canned reply to a prompt, one token every ``delay`` s."""

    delay = 0.05

    def reply(self, prompt: str) -> str:
        if prompt.startswith("plan:"):
            return "Let me look up the weather in Lisbon first. "
        return (
            f"Lisbon will be {prompt.rsplit('forecast: ', 1)[-1]} tomorrow, so pack light: "
            "a linen shirt, sunglasses and comfortable shoes for the hills. Trams 28 and 12 "
            "are the easy way up to the castle; go early, before the queues. "
        )

    async def stream(self, prompt: str) -> AsyncIterator[str]:
        for token in re.findall(r"\S+\s*", self.reply(prompt)):
            await anyio.sleep(self.delay)
            yield token


MODEL = ScriptedModel()

#: where a running model call sends its tokens: the step's ``ctx.emit`` (set by ``think``)
TOKENS: ContextVar[Callable[[str], None]] = ContextVar("tokens")


@tool(name="chat_model", effect="read")  # in doubt after a crash: asked again
async def chat_model(prompt: str) -> list[str]:
    """One model request: each token goes to the browser as it comes; the tokens are logged."""
    tokens = []
    async for token in MODEL.stream(prompt):
        TOKENS.get()(token)
        tokens.append(token)
    return tokens


@tool(name="weather", effect="read")
async def weather(city: str) -> str:
    return "sunny, 24 °C"


# -- the agent: one actor per conversation --------------------------------------------------


@actorlog.message(name="question")
@attrs.define
class Question:
    text: str


@actorlog.message(name="chat_history")
@attrs.define
class History:
    turns: list[list[str]] = attrs.Factory(list)


async def think(ctx: Context, prompt: str) -> str:
    """A model call whose tokens the callers see as they come: ``{"token": "..."}`` events."""
    streamed: list[str] = []

    def emit(token: str) -> None:
        streamed.append(token)
        ctx.emit({"token": token})

    reset = TOKENS.set(emit)
    try:
        tokens = await ctx.call(chat_model, prompt)
    finally:
        TOKENS.reset(reset)
    if not streamed:  # served from the log (it completed before a crash): the tool did not
        for token in tokens:  # run, so emit its tokens again, keeping the event numbers
            ctx.emit({"token": token})
    return "".join(tokens)


class Chat(Actor[History], name="sse_chat"):
    async def receive(self, ctx: Context, msg: Question) -> str:
        plan = await think(ctx, f"plan: {msg.text}")
        ctx.emit({"status": "looking up the weather"})
        forecast = await ctx.call(weather, "Lisbon")
        ctx.emit({"status": f"forecast: {forecast}"})
        answer = plan + await think(ctx, f"answer: {msg.text}; forecast: {forecast}")
        self.state.turns.append([msg.text, answer])
        return answer


# -- the web app: the page, and the answer as Server-Sent Events ----------------------------


def sse(data: Any, *, event: str | None = None, id: str | None = None) -> str:
    head = (f"event: {event}\n" if event else "") + (f"id: {id}\n" if id else "")
    return head + f"data: {json.dumps(data)}\n\n"


def chain(digest: str, data: Any) -> str:
    """The checksum of the events 1..n a page holds, from that of 1..n-1 and event n."""
    return hashlib.blake2b(f"{digest}{json.dumps(data)}".encode(), digest_size=6).hexdigest()


async def ask(request: Request) -> Response:
    """``GET /chat/{conversation}/ask?q=<question id>&text=...``: the answer as SSE.

    Each event's ``id:`` is ``<number>.<checksum of the events 1..number>``; the browser
    sends the last one back in ``Last-Event-ID`` when it reconnects. The events of the resumed
    run up to that number are held back and dropped if they add up to the same checksum (the
    page has them), else sent (the page replaces from the first one: the rule below).
    """
    system: ActorSystem = request.state.actors
    text, qid = request.query_params.get("text", ""), request.query_params.get("q", "")
    last, _, held_sum = request.headers.get("last-event-id", "").partition(".")
    seen = int(last) if last.isdecimal() else 0
    if not qid:
        return PlainTextResponse("the question's id is missing: ?q=...", status_code=400)
    try:
        ref = system.ref(Chat, request.path_params["conversation"])
        # the question's id is the message id: asking again joins the step or gets its reply
        stream = ref.ask_stream(Question(text), message_id=f"q-{qid}")
        await stream.__aenter__()  # logs the message (or finds it); bad ids raise here
    except ConfigurationError as exc:
        return PlainTextResponse(str(exc), status_code=400)

    async def events() -> AsyncIterator[str]:
        yield "retry: 1000\n\n"  # reconnect 1 s after the connection drops
        digest, held = "", ""
        try:
            async for ev in stream:
                digest = chain(digest, ev.data)
                item = sse(ev.data, id=f"{ev.number}.{digest}")
                if ev.number < seen:
                    held += item
                elif ev.number == seen and digest == held_sum:
                    held = ""  # the page holds these events already
                else:
                    yield held + item  # (held: the page's copy differs, send it again)
                    held = ""
            yield held + sse(stream.reply, event="reply")
        except ActorlogError as exc:  # the step failed (HandlerError), is in doubt, ...
            yield held + sse(f"{type(exc).__name__}: {exc}", event="failed")
        finally:
            await stream.aclose()  # the step goes on without this listener

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)


async def page(request: Request) -> Response:
    return FileResponse(HERE / "index.html")


def make_app(db: Path) -> Starlette:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        # recovers every conversation with unfinished work at start: an answer cut short by
        # a crash is finished even if no page asks again
        async with ActorSystem(SqliteStore(db), actors=[Chat]) as system:
            yield {"actors": system}

    routes = [Route("/", page), Route("/chat/{conversation}/ask", ask)]
    return Starlette(routes=routes, lifespan=lifespan)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", type=Path, default=Path("sse_chat.db"))
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--delay", type=float, default=MODEL.delay, help="s per token")
    args = parser.parse_args()
    MODEL.delay = args.delay
    # open answers would hold a graceful shutdown: close them after 1 s (the steps go on)
    uvicorn.run(make_app(args.db), port=args.port, timeout_graceful_shutdown=1)


if __name__ == "__main__":
    main()
