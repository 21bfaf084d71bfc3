"""A web service that owns its agents: Starlette + uvicorn, one actor per conversation, SQLite.

Serve it (one process: a SQLite file has one writer; see docs/service.md):

    uvicorn --app-dir examples service:app --port 8000
    curl -X POST localhost:8000/conversations/c1/messages -H 'Idempotency-Key: k-1' \\
         -H 'Content-Type: application/json' -d '{"text": "hotels in Lisbon"}'

Or run the demo (the test suite runs it too):  python examples/service.py

The demo starts the server (uvicorn, in a child process) and has 20 conversations talk to it
at once (httpx). Then it asks each conversation a second question while the mail provider
hangs, and SIGKILLs the server while those 20 requests are in flight, their e-mails sent but
not answered: in doubt. It starts the server again: the system recovers every conversation on
start and sends each interrupted e-mail again with the same idempotency key (the provider
drops the duplicate); the clients retry with the same ``Idempotency-Key`` and get the
recorded replies. Last, the server is stopped with SIGTERM, as a deployment does, while a
request waits on its e-mail: the step finishes, the request gets its reply, and the store is
closed.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

import actorlog
import anyio
import anyio.to_thread
import attrs
from actorlog import Actor, ActorSystem, Context, tool
from actorlog.errors import ActorlogError, ConfigurationError, HandlerError, InDoubtError
from actorlog.stores import SqliteStore
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

if TYPE_CHECKING:
    import httpx  # the demo's client (the server does not need it)

WORKDIR = Path(os.environ.get("ACTORLOG_EXAMPLE_DIR", tempfile.gettempdir())) / "actorlog-service"
STORE = WORKDIR / "service.db"  # the actors' log
MAIL = WORKDIR / "mail.db"  # the outside world: what the mail provider received
MAIL_HANGS = WORKDIR / "mail-provider-hangs"  # the demo's switch: the provider stops answering


def say(line: str) -> None:
    print(line, flush=True)


# -- the outside world: a search (read) and a mail provider that deduplicates by key ---------


def _world(sql: str, *args: Any) -> list[Any]:
    with closing(sqlite3.connect(MAIL, timeout=30)) as db, db:
        db.execute("CREATE TABLE IF NOT EXISTS searches (query TEXT)")
        db.execute("CREATE TABLE IF NOT EXISTS attempts (key TEXT)")
        db.execute("CREATE TABLE IF NOT EXISTS mails (key TEXT PRIMARY KEY, body TEXT)")
        return db.execute(sql, args).fetchall()


@tool(name="search", effect="read")  # safe to repeat: re-run if in doubt
async def search(query: str) -> str:
    await anyio.to_thread.run_sync(_world, "INSERT INTO searches VALUES (?)", query)
    return f"the best answer to {query!r}"


@tool(name="send_email", effect="write", idempotent=True)  # re-run with the same key if in doubt
async def send_email(to: str, body: str, *, idempotency_key: str) -> None:
    # the provider keeps one mail per key (like Stripe's Idempotency-Key header)
    await anyio.to_thread.run_sync(_world, "INSERT INTO attempts VALUES (?)", idempotency_key)
    await anyio.to_thread.run_sync(
        _world, "INSERT OR IGNORE INTO mails VALUES (?, ?)", idempotency_key, f"{to}: {body}"
    )
    while MAIL_HANGS.exists():  # sent, but no answer yet: a crash now leaves it in doubt
        await anyio.sleep(0.05)


# -- the agent: one actor per conversation -------------------------------------------------


# stable names: the log records names, and uvicorn imports this file as "service"
@actorlog.message(name="say")
@attrs.define
class Say:
    text: str


@actorlog.message(name="transcript")
@attrs.define
class Transcript:
    turns: list[list[str]] = attrs.Factory(list)


class Conversation(Actor[Transcript], name="conversation"):
    async def receive(self, ctx: Context, msg: Say) -> str:
        found = await ctx.call(search, msg.text)
        await ctx.call(send_email, "ops@example.com", f"{self.actor_id}: {found}")
        self.state.turns.append([msg.text, found])
        return found


# -- the web server: the lifespan owns the ActorSystem -------------------------------------


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
    # One system for the process: it opens the store (taking the SQLite file's writer lock)
    # and recovers every conversation with unfinished work before the first request. On
    # shutdown it lets running steps finish for up to shutdown_grace seconds, closes the
    # store and flushes the OpenTelemetry spans.
    WORKDIR.mkdir(parents=True, exist_ok=True)
    async with ActorSystem(SqliteStore(STORE), actors=[Conversation], shutdown_grace=10) as system:
        yield {"actors": system}


async def post_message(request: Request) -> JSONResponse:
    system: ActorSystem = request.state.actors
    conversation = request.path_params["conversation"]
    key = request.headers.get("idempotency-key")
    if not key:
        return JSONResponse({"error": "an Idempotency-Key header is required"}, status_code=400)
    try:
        body = await request.json()
    except ValueError:
        body = None
    text = body.get("text") if isinstance(body, dict) else None
    if not isinstance(text, str):
        return JSONResponse({"error": 'the body must be {"text": "..."}'}, status_code=400)
    try:
        ref = system.ref(Conversation, conversation)
        # the client's key is the message_id: a retry of the request (a timeout, a
        # restart of this server) gets the recorded reply instead of a second step
        reply = await ref.ask(Say(text), message_id=key, timeout=30)
    except ConfigurationError as exc:  # a bad conversation id or key; nothing was written
        return JSONResponse({"error": str(exc)}, status_code=400)
    except (TimeoutError, InDoubtError) as exc:  # logged: it will be handled; retry later
        headers = {"Retry-After": "5"}
        return JSONResponse({"error": str(exc)}, status_code=503, headers=headers)
    except HandlerError as exc:  # the step failed, recorded: a retry gets the same error
        return JSONResponse({"error": str(exc)}, status_code=500)
    except ActorlogError as exc:  # the store failed, the actor is quarantined, ...
        return JSONResponse({"error": str(exc)}, status_code=503)
    return JSONResponse({"conversation": conversation, "reply": reply})


app = Starlette(
    routes=[Route("/conversations/{conversation}/messages", post_message, methods=["POST"])],
    lifespan=lifespan,
)


# -- the demo --------------------------------------------------------------------------------

N = 20
CITIES = ["Lisbon", "Porto", "Madrid", "Seville", "Valencia"]


class Server:
    """``uvicorn --app-dir examples service:app`` in a child process, on a free port."""

    def __init__(self) -> None:
        cmd = [sys.executable, "-m", "uvicorn", "--app-dir", str(Path(__file__).parent)]
        cmd += ["service:app", "--host", "127.0.0.1", "--port", "0", "--no-access-log"]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        assert self.proc.stderr is not None
        self.log: list[str] = []
        for line in self.proc.stderr:
            self.log.append(line)
            if found := re.search(r"Uvicorn running on (http://\S+)", line):
                self.url = found.group(1)
                break
        else:
            raise RuntimeError("the server did not start:\n" + "".join(self.log))
        # keep reading its log, or a full pipe would block the server
        threading.Thread(target=self.log.extend, args=(self.proc.stderr,), daemon=True).start()

    def stop(self, sig: signal.Signals) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=60)


async def ask(client: httpx.AsyncClient, url: str, conv: str, key: str, text: str) -> str:
    r = await client.post(
        f"{url}/conversations/{conv}/messages",
        json={"text": text},
        headers={"Idempotency-Key": key},
        timeout=60,
    )
    r.raise_for_status()
    return str(r.json()["reply"])


async def ask_all(url: str, round_: int, results: dict[str, str]) -> None:
    """Round ``round_`` of every conversation, at once; the replies go into ``results``."""
    import httpx

    async def one(i: int) -> None:
        text = f"{'hotels' if round_ == 1 else 'trains'} in {CITIES[i % len(CITIES)]} #{i}"
        try:
            results[f"c{i}"] = await ask(client, url, f"c{i}", f"c{i}-q{round_}", text)
        except httpx.HTTPError as exc:
            results[f"c{i}"] = f"interrupted ({type(exc).__name__})"

    async with httpx.AsyncClient() as client, anyio.create_task_group() as tg:
        for i in range(N):
            tg.start_soon(one, i)


async def ask_one(url: str, results: dict[str, str]) -> None:
    import httpx

    async with httpx.AsyncClient() as client:
        try:
            results["c0"] = "replied: " + await ask(client, url, "c0", "c0-q3", "ferries")
        except httpx.HTTPError as exc:
            results["c0"] = f"interrupted ({type(exc).__name__})"


def count(sql: str) -> int:
    return int(_world(sql)[0][0])


def demo() -> int:
    WORKDIR.mkdir(parents=True, exist_ok=True)
    for f in WORKDIR.iterdir():
        f.unlink()
    say(f"run 1: uvicorn serves {N} conversations (store: {STORE})")
    server = Server()
    first: dict[str, str] = {}
    anyio.run(ask_all, server.url, 1, first)
    say(f"  round 1: {sum(r.startswith('the best') for r in first.values())} of {N} replied")

    MAIL_HANGS.touch()  # the mail provider stops answering...
    second: dict[str, str] = {}
    thread = threading.Thread(target=anyio.run, args=(ask_all, server.url, 2, second))
    thread.start()
    while count("SELECT count(*) FROM attempts") < 2 * N:  # ...once it has all 20 mails
        time.sleep(0.05)
    code = server.stop(signal.SIGKILL)
    thread.join()
    interrupted = sum(r.startswith("interrupted") for r in second.values())
    say(f"  round 2: {N} e-mails sent, no answer: SIGKILL (exit code {code})")
    say(f"  round 2: {interrupted} of {N} requests interrupted")

    MAIL_HANGS.unlink()
    say("run 2: the same server again; it recovers every conversation on start")
    server = Server()
    retried: dict[str, str] = {}
    anyio.run(ask_all, server.url, 2, retried)  # the clients retry with the same keys
    again: dict[str, str] = {}
    anyio.run(ask_all, server.url, 1, again)  # and once more for round 1

    MAIL_HANGS.touch()  # one more request waits on its e-mail...
    last: dict[str, str] = {}
    thread = threading.Thread(target=anyio.run, args=(ask_one, server.url, last))
    thread.start()
    while count("SELECT count(*) FROM attempts") < 3 * N + 1:
        time.sleep(0.05)
    server.proc.send_signal(signal.SIGTERM)  # ...when the deployment stops the server
    while not any("Shutting down" in line for line in server.log):
        time.sleep(0.05)
    MAIL_HANGS.unlink()  # the provider answers while the server is shutting down
    thread.join()
    code = server.proc.wait(timeout=60)
    say(f"  SIGTERM during a request: {last['c0']} (exit code {code})")

    graceful = last["c0"] == "replied: the best answer to 'ferries'"
    mails = count("SELECT count(*) FROM mails")
    attempts = count("SELECT count(*) FROM attempts")
    twice = "SELECT key FROM attempts GROUP BY key HAVING count(*) = 2"
    resent = count(f"SELECT count(*) FROM ({twice})")
    searches = count("SELECT count(*) FROM searches")
    replied = sum(r.startswith("the best") for r in retried.values())
    recorded = sum(again[c] == first[c] for c in first)
    say("summary")
    say(f"  retried round 2 requests that got their reply: {replied} of {N}")
    say(f"  retried round 1 requests that got the recorded reply: {recorded} of {N}")
    say(f"  e-mails at the provider: {mails}, attempts: {attempts} ({resent} re-sent, same key)")
    say(f"  searches run: {searches} (each question once: the completed ones came from the log)")
    ok = (
        interrupted == replied == recorded == resent == N
        and graceful
        and mails == 2 * N + 1
        and attempts == 3 * N + 1
        and searches == 2 * N + 1
    )
    say("OK: every e-mail once at the provider, every retry got its reply" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(demo())
