"""The console in a real browser: Playwright driving Debian's Chromium (no browser download)
against ``actorlog serve`` running as a process, with real runtimes writing the store.

Takes the screenshots docs/operators.md shows (docs/images/console-*.png).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from actorlog.stores import SqliteStore
from playwright import sync_api  # the test extra installs it (the driver only, no browser)

from tests import _pg
from tests.cli._support import WORKER
from tests.web._agents import make_cancelled_write
from tests.web._owner import owning
from tests.web._serve import ROOT, live_worker, serve

IMAGES = ROOT / "docs" / "images"
TOKEN = "browser-token"


@pytest.fixture
def browser(chromium: str) -> Iterator[object]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def crowded(crashed: Path) -> Path:
    """The crashed store and a few more actors (registered, nothing logged), so the overview
    has a list to show. Made before the browser starts (its sync API runs an event loop)."""
    _add_quiet_actors(crashed)
    return crashed


def _add_quiet_actors(db: Path) -> None:

    async def add() -> None:
        store = SqliteStore(db)
        await store.open()
        try:
            for i in range(3):
                await store.register_actor(f"triage-{i}", "oncall.Triage")
        finally:
            await store.close()

    anyio.run(add, backend="asyncio")


def test_resolve_in_the_browser_and_watch_the_actor_finish(crowded: Path, browser: object) -> None:
    crashed = crowded
    expect = sync_api.expect
    with serve(crashed, "--allow-writes", "--token", TOKEN) as s:
        page = browser.new_page(viewport={"width": 1280, "height": 800})  # type: ignore[attr-defined]
        page.goto(s.base + "/")
        rows = page.locator("table.actors tbody tr")
        expect(rows).to_have_count(4)
        IMAGES.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(IMAGES / "console-overview.png"), full_page=True)

        page.select_option("select[name=status]", "in_doubt")  # applies on change
        expect(rows).to_have_count(1)
        expect(rows.first).to_have_attribute("data-actor", "incident-7")
        page.click("text=incident-7")
        expect(page.locator("#status")).to_have_text("in doubt")
        expect(page.locator("#live")).to_have_text("live: watching the log")

        # not signed in: no form, and a write straight to the endpoint is refused
        expect(page.locator("form.resolve")).to_have_count(0)
        refused = page.request.post(
            s.base + "/resolve",
            form={"id": "incident-7", "intent_seq": "19", "action": "retry"},
        )
        assert refused.status == 403 and "sign in" in refused.text()

        page.goto(s.base + f"/login?token={TOKEN}")
        page.goto(s.base + "/actor?id=incident-7")
        form = page.locator("form.resolve")
        form.locator("input[name=value]").fill('"PAGE-42"')
        form.locator("input[name=reason]").fill("seen in PagerDuty")
        form.locator("button[type=submit]").click()
        expect(page.locator("#notice")).to_contain_text("recorded decision seq 20 (result)")
        expect(page.locator("#status")).to_have_text("running")  # settled, not yet run

        # a runtime recovers the actor: the open page shows the step finish, live
        resumed = subprocess.run(
            [sys.executable, str(WORKER), str(crashed), "resume"],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        assert '"reply"' in resumed.stdout
        expect(page.locator("#status")).to_have_text("idle", timeout=20_000)
        expect(page.locator("section.step")).to_have_count(3)
        expect(page.locator("section.step.s-ok")).to_have_count(3)
        expect(page.locator("tr.decision")).to_contain_text("PAGE-42")
        page.screenshot(path=str(IMAGES / "console-actor.png"), full_page=True)
        page.close()


def test_a_step_arrives_live_while_a_runtime_writes(tmp_path: Path, browser: object) -> None:
    db = tmp_path / "live.db"
    expect = sync_api.expect
    template = "http://localhost:16686/trace/{trace_id}"
    with live_worker(db) as worker, serve(db, "--trace-url", template) as s:
        page = browser.new_page()  # type: ignore[attr-defined]
        page.goto(s.base + "/")
        page.fill("input[name=q]", "chat")
        page.click("button[type=submit]")
        page.click("text=chat-1")
        steps = page.locator("section.step")
        expect(steps).to_have_count(1)
        expect(page.locator("#live")).to_have_text("live: watching the log")
        worker.ask("are you <there>?")
        expect(steps).to_have_count(2, timeout=20_000)  # no reload: pushed by the server
        expect(steps.nth(1)).to_contain_text("are you <there>?")  # shown as text
        assert page.locator("section.step script").count() == 0
        link = steps.nth(1).locator("a.trace")
        expect(link).to_have_attribute("href", _trace_pattern())
        page.close()


@pytest.fixture
def pg_schema(pg_url: str) -> Iterator[str]:
    schema = _pg.new_schema("web_browser")
    yield schema
    anyio.run(_pg.drop_schemas, pg_url, schema, backend="asyncio")


def test_cancel_a_long_step_from_the_actor_page_and_see_it_cancelled_live(
    pg_url: str, pg_schema: str, browser: object
) -> None:
    """On PostgreSQL, ``job-1``'s owner runs in another process, its step blocked in a write
    tool. One page watches the actor; from another, the operator cancels the step. The
    watching page shows the step recorded cancelled, without a reload."""
    expect = sync_api.expect
    url = _pg.schema_url(pg_url, pg_schema)
    with owning(pg_url, pg_schema) as owner, serve(url, "--allow-writes", "--token", TOKEN) as s:
        context = browser.new_context()  # type: ignore[attr-defined]
        context.new_page().goto(s.base + f"/login?token={TOKEN}")
        watching = context.new_page()
        watching.goto(s.base + "/actor?id=job-1")
        expect(watching.locator("#live")).to_have_text("live: watching the log")
        steps = watching.locator("section.step")
        expect(steps).to_have_count(1)
        expect(steps.first).to_have_attribute("data-status", "in_doubt")  # in flight

        acting = context.new_page()
        acting.goto(s.base + "/actor?id=job-1")
        form = acting.locator("#cancel-form")
        form.locator("input[name=reason]").fill("too <slow>")
        form.locator("button[type=submit]").click()
        expect(acting.locator("#notice")).to_contain_text("cancel of the running step requested")

        assert owner.line() == "outcome StepCancelledError"
        cancelled = watching.locator("#step-1")  # message seq 1: the Slow step
        expect(cancelled).to_have_attribute("data-status", "error", timeout=20_000)
        expect(cancelled).to_contain_text("StepCancelledError")
        expect(watching.locator(".event.e-cancelled")).to_have_count(1)
        expect(watching.locator(".event.e-cancel_requested")).to_contain_text("too <slow>")
        assert owner.line() == "after 2"
        expect(steps).to_have_count(2, timeout=20_000)  # the next message ran
        context.close()


def _trace_pattern() -> object:
    import re

    return re.compile(r"^http://localhost:16686/trace/[0-9a-f]{32}$")


@pytest.fixture
def paid(tmp_path: Path) -> tuple[Path, int]:
    """A store whose ``payer-1`` has a transfer its handler cancelled while it ran (made
    before the browser starts: its sync API runs an event loop)."""
    db = tmp_path / "pay.db"
    return db, make_cancelled_write(db)


def test_rule_on_a_cancelled_write_in_the_browser(paid: tuple[Path, int], browser: object) -> None:
    """Issue 25: the queue lists the cancelled write needing a ruling, the actor's header
    offers the ruling (no retry), and the ruling shows in the timeline."""
    db, seq = paid
    expect = sync_api.expect
    with serve(db, "--allow-writes", "--token", TOKEN) as s:
        page = browser.new_page(viewport={"width": 1280, "height": 800})  # type: ignore[attr-defined]
        page.goto(s.base + f"/login?token={TOKEN}")
        page.goto(s.base + "/queue")
        row = page.locator("#rulings tr[data-ruling='1']")
        expect(row).to_have_count(1)
        expect(row).to_have_attribute("data-intent-seq", str(seq))
        expect(row).to_contain_text("task 0")
        expect(row).to_contain_text("web.transfer")
        expect(page.locator("#queue-count")).to_have_text("1")
        IMAGES.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(IMAGES / "console-ruling.png"), full_page=True)
        page.click("#rulings a:text('payer-1')")
        head = page.locator("#in-doubt")
        expect(head).to_contain_text("1 tool call(s) may or may not have happened")
        form = page.locator("form.resolve.ruling")
        expect(form.locator("input[value=retry]")).to_have_count(0)
        form.locator("input[name=value]").fill('"TX-991"')
        form.locator("input[name=reason]").fill("the bank statement shows it")
        form.locator("button[type=submit]").click()
        expect(page.locator("#notice")).to_contain_text("recorded ruling (result)")
        expect(page.locator("#in-doubt")).to_have_count(0)
        expect(page.locator("section.step .doubt")).to_contain_text('it happened -> "TX-991"')
        page.goto(s.base + "/queue")
        expect(page.locator("#empty")).to_be_visible()
        page.close()
