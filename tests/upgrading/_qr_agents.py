"""Two versions of one actor for ``test_dropped_message_type.py`` (issue 24, item 14): v1
(``_qr_r.V1``) handles ``Q | R``, and an ``R`` step calls an idempotent write; v2 (``V2``,
here) handles only ``Q``. ``R`` lives in ``_qr_r``: a v2 process that does not import it
cannot decode an ``R`` at all."""

from __future__ import annotations

import time

import attrs
from actorlog import Actor, Context, message, tool

#: [marks file path, the text whose write blocks (the SIGKILL lands there)]
SETUP = ["", ""]


@message(name="qr.q")
@attrs.frozen
class Q:
    text: str


@attrs.define
class Seen:
    texts: list[str] = attrs.Factory(list)


@tool(effect="write", idempotent=True, name="qr.write")
async def write(text: str, *, idempotency_key: str) -> str:
    with open(SETUP[0], "a") as f:  # noqa: ASYNC230 (a test tool: a tiny, local write)
        f.write(f"{idempotency_key} {text}\n")
    if text == SETUP[1]:
        print("KILLPOINT", flush=True)
        time.sleep(600)  # noqa: ASYNC251 (blocking on purpose: the SIGKILL lands here)
    return f"wrote {text}"


class V2(Actor[Seen], name="qr.actor"):
    """Today's code: ``R`` is no longer handled."""

    async def receive(self, ctx: Context, msg: Q) -> str:
        self.state.texts.append(msg.text)
        return f"q {msg.text} after {len(self.state.texts) - 1}"
