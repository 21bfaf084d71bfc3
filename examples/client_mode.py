"""A web front end that owns no actors: ``ActorSystem(store, client=True)``.

Several runtimes run the actors on one PostgreSQL; a web server in front of them only sends
and asks. In client mode it places no actor on itself and takes none over: every ``ask``
goes through the store's inbox to the runtime that owns the actor (or that places it), and
the answer comes back by ``NOTIFY``. The request id becomes the ``message_id``, so a client
retrying a request (after a timeout, from another web server) gets the recorded answer
instead of a second deposit.

    python examples/client_mode.py runtime postgresql://localhost/agents   # one or more
    python examples/client_mode.py web postgresql://localhost/agents --port 8080
    curl 'http://127.0.0.1:8080/deposit/acct-1/5?request_id=r-1'
    python examples/client_mode.py demo postgresql://localhost/agents      # all in one

The web part is plain asyncio (``asyncio.start_server``) so that the example needs nothing
but actorlog. With Starlette or FastAPI the pattern is the same -- open the client system
once in the application's lifespan, use it from every handler::

    @contextlib.asynccontextmanager
    async def lifespan(app):
        async with ActorSystem(PostgresStore(URL), client=True) as actors:
            app.state.actors = actors
            yield

    async def deposit(request):
        ref = request.app.state.actors.ref(Account, request.path_params["account"])
        total = await ref.ask(
            Deposit(int(request.path_params["amount"])),
            message_id=request.query_params["request_id"],
            timeout=10,
        )
        return JSONResponse({"total": total})
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
from urllib.parse import parse_qs, urlsplit

import attrs
from actorlog import Actor, ActorSystem, Context, tool
from actorlog.stores import PostgresStore


@attrs.define
class Deposit:
    amount: int


@attrs.define
class Balance:
    total: int = 0


@tool(effect="write", idempotent=True)
async def book(amount: int, *, idempotency_key: str, fencing_token: int) -> int:
    """The external effect. A real ledger would store ``idempotency_key`` (apply once) and
    refuse a ``fencing_token`` lower than the highest it has seen (docs/scaling.md)."""
    return amount


class Account(Actor[Balance]):
    async def receive(self, ctx: Context, msg: Deposit) -> int:
        self.state.total += await ctx.call(book, msg.amount)
        return self.state.total


def runtime_system(url: str, schema: str | None) -> ActorSystem:
    owner = f"{socket.gethostname()}-{os.getpid()}"
    store = PostgresStore(url, schema=schema) if schema else PostgresStore(url)
    return ActorSystem(store, actors=[Account], owner=owner, lease_ttl=5.0)


def client_system(url: str, schema: str | None) -> ActorSystem:
    store = PostgresStore(url, schema=schema) if schema else PostgresStore(url)
    return ActorSystem(store, client=True)


async def serve_web(actors: ActorSystem, port: int) -> asyncio.Server:
    """``GET /deposit/<account>/<amount>?request_id=<id>`` -> ``{"total": n}``."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = (await reader.readline()).decode()
            while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                pass  # headers
            _, target, _ = request.split(" ", 2)
            parts = urlsplit(target)
            _, verb, account, amount = parts.path.split("/")
            assert verb == "deposit"
            request_id = parse_qs(parts.query).get("request_id", [None])[0]
            ref = actors.ref(Account, account)
            total = await ref.ask(Deposit(int(amount)), message_id=request_id, timeout=10)
            status, body = "200 OK", json.dumps({"total": total})
        except Exception as exc:
            status, body = "500 Internal Server Error", json.dumps({"error": str(exc)})
        writer.write(
            f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}".encode()
        )
        await writer.drain()
        writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", port)


async def get(port: int, path: str) -> dict[str, int]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
    await writer.drain()
    response = await reader.read()
    writer.close()
    return dict(json.loads(response.split(b"\r\n\r\n", 1)[1]))


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=["runtime", "web", "demo"])
    p.add_argument("url", help="postgresql://... (the store shared by runtimes and clients)")
    p.add_argument("--schema", help="PostgreSQL schema of the store (default: public)")
    p.add_argument("--port", type=int, default=8080)
    args = p.parse_args()
    if args.mode == "runtime":
        async with runtime_system(args.url, args.schema):
            print("runtime running; Ctrl-C to stop", flush=True)
            await asyncio.Event().wait()
    elif args.mode == "web":
        async with client_system(args.url, args.schema) as actors:
            server = await serve_web(actors, args.port)
            print(f"listening on http://127.0.0.1:{args.port}", flush=True)
            async with server:
                await server.serve_forever()
    else:
        async with (
            runtime_system(args.url, args.schema),
            client_system(args.url, args.schema) as actors,
        ):
            server = await serve_web(actors, 0)
            port = server.sockets[0].getsockname()[1]
            async with server:
                for path in (
                    "/deposit/acct-1/5?request_id=r-1",
                    "/deposit/acct-1/7?request_id=r-2",
                    "/deposit/acct-1/7?request_id=r-2",  # a retried request: answered once
                ):
                    print(path, "->", await get(port, path), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
