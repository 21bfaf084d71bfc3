"""The worker processes of ``test_set_order.py`` (see ``_setvalues.py``)."""

from __future__ import annotations

import sys
import time

import anyio
from actorlog import ActorSystem
from actorlog.stores import SqliteStore

from ._setvalues import NAMESPACE, WORDS, Count, Counter


def _encode_lines() -> None:
    from actorlog._journal import codec as _codec

    for line in sys.stdin:
        value = eval(line, dict(NAMESPACE))  # the parent's repr of a generated value
        out = []
        try:
            out.append(_codec.encode_json(value, "value").hex())
        except Exception as exc:
            out.append("E" + type(exc).__name__)
        try:
            plain = _codec.to_plain([value], "arguments")
            out.append(_codec.encode_plain({"args": plain}, "arguments").hex())
        except Exception as exc:
            out.append("E" + type(exc).__name__)
        print(" ".join(out), flush=True)


async def _run(db: str, mode: str) -> None:
    async with ActorSystem(SqliteStore(db), actors=[Counter]) as system:
        ref = await system.spawn(Counter, "counter")
        try:
            n = await ref.ask(Count(WORDS), timeout=30)
        except Exception as exc:
            print("ERROR", type(exc).__name__, exc, flush=True)
            return
        if mode == "run":
            print("DONE", n, flush=True)
            time.sleep(600)  # noqa: ASYNC251 (blocking on purpose: the SIGKILL lands here)
        print("OK", n, system.status("counter"), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "encode":
        _encode_lines()
    else:
        anyio.run(_run, sys.argv[2], sys.argv[1], backend="asyncio")
