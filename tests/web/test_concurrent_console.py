"""The console (``actorlog serve``, in a real Chromium) shows which task of a step made each
call, when it ran and which calls overlapped, in the words of ``actorlog history`` and the
HTML export (issue 25). The store is the hand-written fan-out log of tests/cli/_fanout.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright import sync_api

from tests.cli._fanout import ACTOR, write_fanout_log
from tests.cli.test_concurrent_history import WORDS
from tests.web._serve import ROOT, serve

IMAGES = ROOT / "docs" / "images"


@pytest.fixture
def browser(chromium: str) -> Iterator[object]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def fanout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TZ", "UTC")  # the console's clock times are the server's local time
    db = tmp_path / "fan.db"
    write_fanout_log(db)  # before the browser starts (its sync API runs an event loop)
    return db


def test_the_console_shows_tasks_and_overlapping_calls(fanout: Path, browser: object) -> None:
    expect = sync_api.expect
    with serve(fanout) as s:
        page = browser.new_page(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
        page.goto(s.base + f"/actor?id={ACTOR}")
        steps = page.locator("section.step[data-concurrent=true]")
        expect(steps).to_have_count(2)
        for seq, words in WORDS.items():
            row = page.locator(f'tr.call[data-intent-seq="{seq}"]')
            expect(row.locator(".conc")).to_have_text(words)
        expect(page.locator('tr.call[data-intent-seq="4"]')).to_have_attribute(
            "data-parallel-with", "5"
        )
        expect(page.locator('tr.call[data-intent-seq="14"]')).to_have_attribute("data-task", "1.0")
        effect = page.locator("tr.effect", has_text="(task 1)")
        expect(effect).to_have_count(1)
        IMAGES.mkdir(parents=True, exist_ok=True)  # the picture docs/operators.md shows
        steps.first.screenshot(path=str(IMAGES / "console-parallel.png"))
