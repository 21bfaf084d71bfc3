"""examples/sse_chat (docs/streaming.md, "Streaming to a browser (SSE)"): the app as a real
process on a SQLite file, SIGKILLed mid-answer and started again on the same file and port.
In Chromium the page's EventSource reconnects by itself and the answer goes on with nothing
shown twice or lost; over HTTP, ``Last-Event-ID`` spares a reconnecting client the events it
holds. The completed tool calls are not made again (the log, read with ``actorlog.ops``, and
the worker's marks)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from actorlog import ops
from playwright import sync_api

from tests.web.sse_chat_worker import GATE_AT, app as example

ROOT = Path(__file__).resolve().parents[2]
PLAN = example.ScriptedModel().reply("plan: ")
ANSWER = PLAN + example.ScriptedModel().reply("answer: x; forecast: sunny, 24 °C")
TOKENS = re.findall(r"\S+\s*", PLAN)  # the plan's tokens, then two statuses, then the answer's
SHOWN_AT_KILL = "".join(re.findall(r"\S+\s*", ANSWER)[: len(TOKENS) + GATE_AT])
LAST_AT_KILL = len(TOKENS) + 2 + GATE_AT  # the number of the last event before the gate


class App:
    """``python -m tests.web.sse_chat_worker`` (the example, gated) on a port and a file."""

    def __init__(self, db: Path, port: int) -> None:
        cmd = [sys.executable, "-m", "tests.web.sse_chat_worker", str(db), str(port)]
        cmd.append(str(db.parent))
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.PIPE, text=True)
        assert self.proc.stderr is not None
        self.log: list[str] = []
        for line in self.proc.stderr:
            self.log.append(line)
            if "Uvicorn running on" in line:
                break
        else:
            raise RuntimeError("the app did not start:\n" + "".join(self.log))
        threading.Thread(target=self.log.extend, args=(self.proc.stderr,), daemon=True).start()
        self.base = f"http://127.0.0.1:{port}"

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        assert self.proc.wait(timeout=30) == -signal.SIGKILL


@contextlib.contextmanager
def running(db: Path, port: int) -> Iterator[App]:
    a = App(db, port)
    try:
        yield a
    finally:
        if a.proc.poll() is None:
            a.proc.send_signal(signal.SIGKILL)
            a.proc.wait(timeout=30)
        assert a.proc.stderr is not None
        a.proc.stderr.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def marks(db: Path) -> list[str]:
    return (db.parent / "marks").read_text().split()


def calls(db: Path, conversation: str) -> list[tuple[str, str]]:
    async def read() -> list[tuple[str, str]]:
        async with ops.opened(f"sqlite:///{db}") as store:
            (step,) = (await ops.history(store, conversation)).steps
            assert step.status == "ok"
            return [(c.tool, c.status) for c in step.calls]

    # in a thread of its own: Playwright's sync API runs an event loop in this one
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(anyio.run, read).result()


COMPLETED_ONCE = [("chat_model", "ok"), ("weather", "ok"), ("chat_model", "ok")]


@pytest.fixture
def browser(chromium: str) -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


def test_the_page_resumes_the_answer_after_a_sigkill(tmp_path: Path, browser: Any) -> None:
    expect = sync_api.expect
    db, port = tmp_path / "chat.db", free_port()
    with running(db, port) as first:
        page = browser.new_page()
        page.goto(first.base + "/?c=c-1")
        # every text the answer shows, in order: each must be a prefix of the answer
        page.evaluate(
            """() => { window.shown = []; const a = document.getElementById("answer");
            new MutationObserver(() => window.shown.push(a.textContent))
              .observe(a, {childList: true, characterData: true, subtree: true}); }"""
        )
        page.click("button")
        expect(page.locator("#answer")).to_have_text(SHOWN_AT_KILL)  # the model waits here
        expect(page.locator("#status")).to_have_text("forecast: sunny, 24 °C")
        first.kill()
        expect(page.locator("#conn")).to_have_text("reconnecting...")
    with running(db, port):
        # the page is back (the resumed request waits at the gate): let the model go on
        expect(page.locator("#conn")).to_have_text("streaming", timeout=30_000)
        (db.parent / "go").touch()
        expect(page.locator("#conn")).to_have_text("done", timeout=30_000)
        expect(page.locator("#answer")).to_have_text(ANSWER)
        # the streamed text alone made the answer (the reply did not have to replace it)
        expect(page.locator("#answer")).to_have_attribute("data-from", "stream")
        shown: list[str] = page.evaluate("window.shown")
        assert shown[-1] == ANSWER
        assert all(ANSWER.startswith(s) for s in shown), shown  # nothing twice
        assert [len(s) for s in shown] == sorted(len(s) for s in shown)  # nothing taken back
        assert SHOWN_AT_KILL in shown
        # a reload after the answer: the same question id, the reply whole
        page.reload()
        expect(page.locator("#conn")).to_have_text("done")
        expect(page.locator("#answer")).to_have_text(ANSWER)
        expect(page.locator("#answer")).to_have_attribute("data-from", "reply")
    # the plan request and the weather lookup completed before the kill: not made again;
    # the answer request was cut short: made again
    assert sorted(marks(db)) == ["answer", "answer", "plan", "weather"]
    assert calls(db, "c-1") == COMPLETED_ONCE


def events(r: httpx.Response) -> Iterator[dict[str, str]]:
    """The SSE events of a response, each a dict of its fields."""
    ev: dict[str, str] = {}
    for line in r.iter_lines():
        if line:
            field, _, value = line.partition(": ")
            ev[field] = value
        elif ev:
            yield ev
            ev = {}


def test_last_event_id_spares_the_events_the_client_holds(tmp_path: Path) -> None:
    db, port = tmp_path / "chat.db", free_port()
    url = "/chat/c-2/ask?q=h1&text=x"
    with running(db, port) as first, httpx.Client(base_url=first.base, timeout=60) as client:
        assert client.get("/chat/c-2/ask?text=x").status_code == 400  # no question id
        with client.stream("GET", url) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            got = events(r)
            assert next(got) == {"retry": "1000"}
            before = [next(got) for _ in range(LAST_AT_KILL)]
        first.kill()
    assert [int(ev["id"].split(".")[0]) for ev in before] == list(range(1, LAST_AT_KILL + 1))
    last_id = before[-1]["id"]
    wrong = f"{LAST_AT_KILL}.000000000000"
    with running(db, port) as again, httpx.Client(base_url=again.base, timeout=60) as client:
        with contextlib.ExitStack() as stack:
            # three clients join the resumed step (it waits at the gate): each response has
            # begun, so each is listening, before the step goes on
            joined = {
                name: stack.enter_context(client.stream("GET", url, headers=headers))
                for name, headers in [
                    ("holds all", {"Last-Event-ID": last_id}),
                    ("holds other text", {"Last-Event-ID": wrong}),
                    ("holds nothing", {}),
                ]
            }
            (db.parent / "go").touch()
            seen = {name: list(events(r))[1:] for name, r in joined.items()}
        # a client that asks after the step ended: the reply only, whatever it holds
        with client.stream("GET", url, headers={"Last-Event-ID": last_id}) as r:
            late = list(events(r))[1:]
    assert late == [{"event": "reply", "data": json.dumps(ANSWER)}]
    for name, received in seen.items():
        *evs, reply = received
        assert reply == {"event": "reply", "data": json.dumps(ANSWER)}, name
        numbers = [int(ev["id"].split(".")[0]) for ev in evs]
        start = LAST_AT_KILL + 1 if name == "holds all" else 1
        assert numbers == list(range(start, numbers[-1] + 1)), name
        held = before if name == "holds all" else []
        text = "".join(json.loads(ev["data"]).get("token", "") for ev in held + evs)
        assert text == ANSWER, name
        # the ids go on from the client's: the same checksums as a client that got them all
        assert [ev["id"] for ev in held + evs] == [ev["id"] for ev in seen["holds nothing"][:-1]]
    assert sorted(marks(db)) == ["answer", "answer", "plan", "weather"]
    assert calls(db, "c-2") == COMPLETED_ONCE
