"""A fake external service that enforces fencing tokens (docs/scaling.md, "Fencing tokens
for the outside world"): per resource it remembers the highest token it has seen and refuses
a request with a lower one. Used by the tests as the outside world a zombie must not reach.

Protocol: one JSON line per connection, ``[owner, resource, key, token]``; the answer is one
line, ``ok`` or ``stale``.
"""

from __future__ import annotations

import json

import anyio
import attrs
from anyio.abc import SocketStream


@attrs.frozen
class Request:
    owner: str
    resource: str
    key: str
    token: int
    accepted: bool


@attrs.define
class FenceService:
    #: every request in arrival order
    log: list[Request] = attrs.Factory(list)
    highest: dict[str, int] = attrs.Factory(dict)
    #: idempotency key -> how many times its effect was applied (accepted and new)
    applied: dict[str, int] = attrs.Factory(dict)

    async def handle(self, stream: SocketStream) -> None:
        try:
            await self._handle(stream)
        except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionError):
            pass  # the caller died (SIGKILL) mid-request: as if it had never called

    async def _handle(self, stream: SocketStream) -> None:
        async with stream:
            line = b""
            while not line.endswith(b"\n"):
                line += await stream.receive()
            owner, resource, key, token = json.loads(line)
            accepted = token >= self.highest.get(resource, 0)
            if accepted:
                self.highest[resource] = token
                if key not in self.applied:  # idempotent: a key is applied once
                    self.applied[key] = 1
            self.log.append(Request(owner, resource, key, token, accepted))
            await stream.send(b"ok\n" if accepted else b"stale\n")

    def accepted(self) -> list[Request]:
        return [r for r in self.log if r.accepted]


class StaleTokenError(Exception):
    """The service refused a request with a token lower than one it has seen."""


async def call(port: int, owner: str, resource: str, key: str, token: int) -> None:
    """One request to the service. Raises ``StaleTokenError`` if it was refused."""
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(json.dumps([owner, resource, key, token]).encode() + b"\n")
        answer = b""
        while not answer.endswith(b"\n"):
            answer += await stream.receive()
    if answer.strip() != b"ok":
        raise StaleTokenError(f"token {token} refused for {resource}")
