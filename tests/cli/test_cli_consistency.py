"""One way to do each thing: ``export --html`` is ``history --html``; ``fork`` takes SEQ and
NEW_ID as arguments like ``resolve`` takes INTENT_SEQ (``--at``/``--as`` still work); the
HTML timeline is in time order."""

from __future__ import annotations

import re
from pathlib import Path

from ._support import ACTOR, cli, worker


def test_export_html_writes_the_same_timeline_as_history_html(crashed: Path) -> None:
    a, b = crashed.parent / "a.html", crashed.parent / "b.html"
    r1 = cli("history", crashed, ACTOR, "--html", a)
    r2 = cli("export", crashed, ACTOR, "--html", b)
    assert r1.code == 0 and r2.code == 0, (r1.err, r2.err)

    def timeline(page: Path) -> str:  # the page less its "generated at" time
        return page.read_text().split('<main class="timeline">', 1)[1].split("</main>")[0]

    assert timeline(a) == timeline(b) and len(timeline(a)) > 1000
    assert f"wrote {b}" in r2.err and r2.out == ""


def test_export_html_with_json_options_is_a_clear_error(crashed: Path) -> None:
    r = cli("export", crashed, ACTOR, "--html", crashed.parent / "x.html", "--raw")
    assert r.code == 2
    assert "--html writes the HTML timeline; it takes no -o or --raw" in r.err


def test_fork_takes_seq_and_new_id_as_arguments_like_resolve(crashed: Path) -> None:
    r = cli("fork", crashed, ACTOR, "14", "incident-7-pos", "--yes")
    assert r.code == 0, r.err
    assert "forked incident-7 at seq 14 as incident-7-pos" in r.out
    old = cli("fork", crashed, ACTOR, "--at", "14", "--as", "incident-7-opt", "--yes")
    assert old.code == 0, old.err  # the option spelling keeps working


def test_fork_without_seq_or_with_two_different_ones_says_how(crashed: Path) -> None:
    r = cli("fork", crashed, ACTOR)
    assert r.code == 2
    assert "fork needs SEQ: actorlog fork STORE ACTOR SEQ NEW_ID" in r.err
    r = cli("fork", crashed, ACTOR, "14", "x", "--at", "12")
    assert r.code == 2 and "SEQ given twice (14 and --at 12): give one" in r.err
    r = cli("fork", crashed, ACTOR, "14")
    assert r.code == 2 and "fork needs NEW_ID" in r.err


def test_the_html_timeline_is_in_time_order(crashed: Path) -> None:
    d = crashed.parent
    assert cli("resolve", crashed, ACTOR, "19", "--result", '"PAGE-1"').code == 0
    worker(crashed, "resume", d / "calls.jsonl")  # a recovery: a `recovered` event, more steps
    page = d / "t.html"
    assert cli("history", crashed, ACTOR, "--html", page).code == 0
    html = page.read_text()
    times = re.findall(r'class="time">([^<]+)<', html)
    kinds = re.findall(r'data-kind="([^"]+)"', html)
    assert "recovered" in kinds and "resolved" in kinds
    assert len(times) >= 5 and times == sorted(times), times
