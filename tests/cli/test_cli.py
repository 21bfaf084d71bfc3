"""The ``actorlog`` console script, run for real against stores left by real crashed runs."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import pty
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from actorlog._journal import codec as _codec

from .._keys import Key
from ._support import (
    ACTOR,
    SCRIPT,
    cli,
    entries,
    flip_byte,
    kill,
    start_crash_run,
    worker,
)

COMMANDS = ("actors", "history", "show", "verify", "resolve", "fork", "export", "compact")


def _calls(d: Path) -> list[dict[str, str]]:
    path = d / "calls.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def _no_traceback(err: str) -> None:
    assert "Traceback" not in err
    assert err.startswith("actorlog: ")
    assert len(err.strip().splitlines()) == 1, err


# -- help and terminal manners -----------------------------------------------------------


def test_console_script_is_installed() -> None:
    assert SCRIPT.exists(), "pip install -e . should install the actorlog console script"


@pytest.mark.parametrize("command", ("", *COMMANDS))
def test_help_everywhere(command: str) -> None:
    r = cli(*([command] if command else []), "--help")
    assert r.code == 0
    assert "usage: actorlog" in r.out
    assert "exit codes" in r.out


def test_no_command_prints_help_and_exits_2() -> None:
    r = cli()
    assert r.code == 2
    assert "usage: actorlog" in r.err


def test_colors_only_on_a_tty(crashed: Path) -> None:
    piped = cli("actors", crashed)
    assert "\x1b[" not in piped.out
    forced = cli("--color", "always", "actors", crashed)
    assert "\x1b[33min_doubt" in forced.out
    # a real terminal gets colors without asking, unless NO_COLOR is set
    for env, colored in (({"NO_COLOR": ""}, True), ({"NO_COLOR": "1"}, False)):
        out = _run_on_tty(["actors", str(crashed)], {**os.environ, **env})
        assert ("\x1b[33min_doubt" in out) is colored


def _run_on_tty(args: list[str], env: dict[str, str], stream: str = "stdout") -> str:
    """Run the script with stdout (or stderr) on a pseudo-terminal; return what it wrote."""
    main, sub = pty.openpty()
    try:
        kw = {stream: sub}
        other = "stderr" if stream == "stdout" else "stdout"
        kw[other] = subprocess.DEVNULL
        p = subprocess.run([str(SCRIPT), *args], env=env, timeout=60, **kw)  # type: ignore[call-overload]  # stream chosen at run time
        assert p.returncode in (0, 1)
        os.close(sub)
        sub = -1
        chunks = []
        while True:
            try:
                data = os.read(main, 65536)
            except OSError:  # EIO: the terminal is closed and drained
                break
            if not data:
                break
            chunks.append(data)
        return b"".join(chunks).decode(errors="replace")
    finally:
        os.close(main)
        if sub != -1:
            os.close(sub)


def test_verify_shows_progress_on_a_tty_stderr(crashed: Path) -> None:
    err = _run_on_tty(["verify", str(crashed)], dict(os.environ), stream="stderr")
    assert "verifying" in err and "entries" in err
    assert "verifying" not in cli("verify", crashed).err  # not when stderr is a pipe


def test_errors_are_one_line_without_traceback_unless_debug(crashed: Path) -> None:
    r = cli("history", crashed, "no-such-actor")
    assert r.code == 2
    _no_traceback(r.err)
    assert "no actor 'no-such-actor'" in r.err
    r = cli("history", crashed, "no-such-actor", "--debug")
    assert r.code != 0
    assert "Traceback" in r.err and "ActorNotFoundError" in r.err


def test_bad_store_url_is_a_usage_error(tmp_path: Path) -> None:
    r = cli("actors", "mysql://nope")
    assert r.code == 2
    _no_traceback(r.err)
    assert "unknown scheme" in r.err


# -- read-only, and safe next to a live runtime --------------------------------------------


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "-"


def test_read_commands_do_not_change_the_store(crashed: Path) -> None:
    files = [crashed, Path(f"{crashed}-wal")]
    before = [_digest(f) for f in files]
    for args in (
        ("actors",),
        ("history", ACTOR),
        ("show", ACTOR, "19"),
        ("verify",),
        ("export", ACTOR),
        ("history", ACTOR, "--json"),
    ):
        assert cli(args[0], crashed, *args[1:]).code == 0
    assert [_digest(f) for f in files] == before


def test_read_only_commands_never_create_a_store(tmp_path: Path) -> None:
    for args in (("actors",), ("verify",), ("resolve", ACTOR, "3", "--retry")):
        r = cli(args[0], tmp_path / "missing.db", *args[1:])
        assert r.code == 2
        _no_traceback(r.err)
        assert "no SQLite store" in r.err or "no store" in r.err
    assert not (tmp_path / "missing.db").exists()


def test_reading_while_a_runtime_holds_the_store(tmp_path: Path) -> None:
    """WAL readers: the CLI reads a store while the runtime that writes it is blocked mid-step."""
    db = tmp_path / "live.db"
    proc = start_crash_run(db, tmp_path / "calls.jsonl")
    try:
        r = cli("actors", f"sqlite:///{db}", "--json")
        assert r.code == 0, r.err
        (a,) = r.json_lines()
        assert a["last_seq"] == 19
        assert cli("verify", db).code == 0
        assert cli("history", db, ACTOR).code == 0
    finally:
        kill(proc)


# -- actors, history, show ---------------------------------------------------------------


def test_actors_lists_the_in_doubt_intent(crashed: Path) -> None:
    r = cli("actors", crashed)
    assert r.code == 0
    header, row = r.out.splitlines()[:2]
    assert header.split()[:3] == ["ACTOR", "TYPE", "STATUS"]
    assert row.split()[:4] == [ACTOR, "oncall.OnCall", "in_doubt", "19"]
    assert "19 page_oncall" in row
    assert "actorlog resolve" in r.out

    (a,) = cli("actors", crashed, "--json").json_lines()
    assert a["status"] == "in_doubt"
    assert a["pending_messages"] == 1
    assert a["last_snapshot_seq"] == 14
    (doubt,) = a["in_doubt"]
    assert doubt["intent_seq"] == 19
    assert doubt["tool"] == "page_oncall"
    assert doubt["policy"] == "escalate"
    assert doubt["key"] == Key(ACTOR, 15, 2)
    assert doubt["needs_operator"] is True


def test_history_table(crashed: Path) -> None:
    r = cli("history", crashed, ACTOR)
    assert r.code == 0
    out = r.out
    assert "status in_doubt" in out
    for text in (
        "message q-1",
        "message q-2",
        "message q-3",
        "snapshot seq 14",
        "IN DOUBT (policy escalate",
        f"actorlog resolve {crashed} {ACTOR} 19",
    ):
        assert text in out, text
    assert re.search(rf"key {ACTOR}:[0-9a-f]{{16}}:15:2", out)
    assert out.index("message q-1") < out.index("message q-2") < out.index("message q-3")


def test_history_json_lines_are_complete(crashed: Path) -> None:
    lines = cli("history", crashed, ACTOR, "--json").json_lines()
    assert lines[0]["type"] == "actor"
    steps = [x for x in lines if x["type"] == "step"]
    assert [s["message_seq"] for s in steps] == [1, 8, 15]
    assert [s["status"] for s in steps] == ["ok", "ok", "in_doubt"]
    first = steps[0]
    assert first["message_id"] == "q-1"
    assert first["body"] == {"question": "why is checkout slow?", "page": False}
    assert [c["tool"] for c in first["calls"]] == ["search_runbooks", "send_email"]
    email = first["calls"][1]
    assert email["key"] == Key(ACTOR, 1, 2)
    assert email["status"] == "ok" and email["result_seq"] == 6
    assert isinstance(email["duration"], float)
    assert first["reply"].startswith("runbook says")
    assert [e["name"] for e in first["effects"]] == ["now"]
    page = steps[2]["calls"][1]
    assert (page["tool"], page["status"], page["result_seq"]) == ("page_oncall", "in_doubt", None)
    (snap,) = [x for x in lines if x["type"] == "snapshot"]
    assert (snap["seq"], snap["handled_seq"], snap["valid"]) == (14, 8, True)


def test_history_since(crashed: Path) -> None:
    lines = cli("history", crashed, ACTOR, "--since", "14", "--json").json_lines()
    assert [x["message_seq"] for x in lines if x["type"] == "step"] == [15]
    # a step in progress at the --since point is shown whole, from its message
    lines = cli("history", crashed, ACTOR, "--since", "17", "--json").json_lines()
    (step,) = [x for x in lines if x["type"] == "step"]
    assert step["message_seq"] == 15
    assert [c["intent_seq"] for c in step["calls"]] == [16, 19]


def test_show_one_entry(crashed: Path) -> None:
    r = cli("show", crashed, ACTOR, "19")
    assert r.code == 0
    assert r.out.startswith(f"{ACTOR} seq 19: intent page_oncall")
    assert "ok" in r.out.splitlines()[3]  # the checksum line
    assert re.search(r'"key": "incident-7:[0-9a-f]{16}:15:2"', r.out)
    v = cli("show", crashed, ACTOR, "19", "--json").json_lines()[0]
    assert v["valid"] is True and v["checksum"] == v["computed_checksum"]
    assert v["payload"]["args"][0] == "db-team"
    assert [x["seq"] for x in v["related"]] == [15]
    r = cli("show", crashed, ACTOR, "99")
    assert r.code == 2
    _no_traceback(r.err)
    assert "no entry at seq 99" in r.err


# -- verify ------------------------------------------------------------------------------


def test_verify_clean_store(crashed: Path) -> None:
    r = cli("verify", crashed)
    assert r.code == 0
    assert r.out.startswith("ok: checked 1 actor(s), 19 entries, 1 snapshot(s)")


def test_verify_finds_a_flipped_byte(crashed: Path) -> None:
    flip_byte(crashed, 3)
    r = cli("verify", crashed)
    assert r.code == 1
    # seq 3 is a result; the step at seq 4 is stored packed against it (its reply is the
    # result's value, FORMAT.md [F21]), so it reads damaged too
    assert "DAMAGE: 2 problem(s)" in r.out
    assert f"{ACTOR} seq 3: checksum check failed" in r.out
    assert f"{ACTOR} seq 4: checksum check failed" in r.out
    report = cli("verify", crashed, ACTOR, "--json").json_lines()[0]
    assert report["ok"] is False
    found = [(f["seq"], f["check"], f["where"]) for f in report["findings"]]
    assert found == [(3, "checksum", "entry"), (4, "checksum", "entry")]
    # seq 3 is before snapshot 14 and its last handled message (seq 8), so recovery does
    # not read it: not quarantined
    (a,) = cli("actors", crashed, "--json").json_lines()
    assert a["status"] == "in_doubt"
    # the history shows the damage and still shows the rest
    lines = cli("history", crashed, ACTOR, "--json").json_lines()
    damage = [(x["seq"], x["check"]) for x in lines if x["type"] == "damage"]
    assert damage == [(3, "checksum"), (4, "checksum")]
    assert len([x for x in lines if x["type"] == "step"]) == 3


def test_damage_in_the_recovery_tail_quarantines(crashed: Path) -> None:
    flip_byte(crashed, 16, offset=20)
    r = cli("actors", crashed)
    assert r.code == 0
    assert "quarantined" in r.out
    assert "seq 16 failed the checksum check" in r.out
    assert cli("verify", crashed).code == 1
    r = cli("resolve", crashed, ACTOR, "19", "--retry")
    assert r.code == 2
    assert "cannot recover" in r.err


def test_verify_finds_a_missing_entry_and_a_bad_snapshot(crashed: Path) -> None:
    with sqlite3.connect(crashed) as conn:
        conn.execute("DROP TRIGGER IF EXISTS entries_contiguous")
        conn.execute("DELETE FROM entries WHERE actor_id = ? AND seq = 11", (ACTOR,))
        (data,) = conn.execute("SELECT data FROM snapshots WHERE seq = 14").fetchone()
        conn.execute("UPDATE snapshots SET data = ? WHERE seq = 14", (b" " + data,))
    report = cli("verify", crashed, "--json").json_lines()[0]
    found = {(f["where"], f["seq"], f["check"]) for f in report["findings"]}
    assert ("entry", 11, "seq chain") in found
    assert ("snapshot", 14, "digest") in found
    r = cli("verify", crashed)
    assert r.code == 1
    assert "seqs 11..11 are missing" in r.out


def test_verify_cannot_read_exits_2(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database" * 100)
    for target in (garbage, tmp_path / "missing.db"):
        r = cli("verify", target)
        assert r.code == 2
        _no_traceback(r.err)


# -- resolve -----------------------------------------------------------------------------


def test_resolve_with_result_then_restart_continues(crashed: Path) -> None:
    d = crashed.parent
    assert [c["tool"] for c in _calls(d)].count("page_oncall") == 1
    r = cli(
        "resolve",
        crashed,
        ACTOR,
        "19",
        "--result",
        '"PAGE-991"',
        "--reason",
        "the page went out; seen in PagerDuty",
        "--by",
        "alice",
    )
    assert r.code == 0, r.err
    assert "recorded decision seq 20 on intent seq 19" in r.out
    assert entries(crashed)[-1] == (20, "decision", "result", 19)

    # the operator's decision is in the history, with who and why
    lines = cli("history", crashed, ACTOR, "--json").json_lines()
    page = [x for x in lines if x["type"] == "step"][2]["calls"][1]
    assert page["status"] == "resolved" and page["value"] == "PAGE-991"
    (dec,) = page["decisions"]
    assert (dec["by"], dec["reason"]) == ("alice", "the page went out; seen in PagerDuty")
    assert any(x["type"] == "event" and x["kind"] == "resolved" for x in lines)
    (a,) = cli("actors", crashed, "--json").json_lines()
    assert (a["status"], a["in_doubt"]) == ("running", [])

    # restart the runtime: it recovers the actor and continues with the supplied result
    out = json.loads(worker(crashed, "resume", d / "calls.jsonl").stdout)
    assert out["state"]["pages"] == ["PAGE-991"]
    assert len(out["state"]["answers"]) == 3
    assert out["reply"].startswith("runbook says: is the primary database down?")
    tools = [c["tool"] for c in _calls(d)]
    assert tools.count("page_oncall") == 1  # never paged twice
    assert tools[-1] == "send_email"  # the rest of the step ran live
    (a,) = cli("actors", crashed, "--json").json_lines()
    assert a["status"] == "idle"
    assert cli("verify", crashed).code == 0
    lines = cli("history", crashed, ACTOR, "--json").json_lines()
    assert [x["status"] for x in lines if x["type"] == "step"] == ["ok", "ok", "ok"]
    assert any(x["type"] == "event" and x["kind"] == "recovered" for x in lines)


def test_resolve_retry_runs_the_call_again(crashed: Path) -> None:
    d = crashed.parent
    assert cli("resolve", crashed, ACTOR, "19", "--retry").code == 0
    (a,) = cli("actors", crashed, "--json").json_lines()
    assert a["in_doubt"][0]["state"] == "retry_authorized"
    out = json.loads(worker(crashed, "resume", d / "calls.jsonl").stdout)
    assert out["state"]["pages"] == ["PAGE-1001"]
    assert [c["tool"] for c in _calls(d)].count("page_oncall") == 2
    lines = cli("history", crashed, ACTOR, "--json").json_lines()
    page = [x for x in lines if x["type"] == "step"][2]["calls"][1]
    assert page["status"] == "ok" and page["value"] == "PAGE-1001"
    assert page["attempts"] == 2  # the original run, then the one retry
    assert [x["action"] for x in page["decisions"]] == ["retry", "attempt"]


def test_resolve_fail_makes_the_step_fail(crashed: Path) -> None:
    d = crashed.parent
    r = cli("resolve", crashed, ACTOR, "19", "--fail", "pager was down; nobody was paged")
    assert r.code == 0
    out = json.loads(worker(crashed, "resume", d / "calls.jsonl").stdout)
    assert out["error"]["type"] == "ToolCallError"
    assert "pager was down" in out["error"]["message"]
    assert out["state"]["pages"] == []
    lines = cli("history", crashed, ACTOR, "--json").json_lines()
    step = [x for x in lines if x["type"] == "step"][2]
    assert step["status"] == "error"
    assert step["calls"][1]["status"] == "failed_by_operator"


def test_resolve_refuses_what_is_not_in_doubt(crashed: Path) -> None:
    before = entries(crashed)
    r = cli("resolve", crashed, ACTOR, "16", "--retry")
    assert r.code == 2
    _no_traceback(r.err)
    assert "no unsettled intent at seq 16 (unsettled: 19 (page_oncall, in_doubt))" in r.err
    r = cli("resolve", crashed, ACTOR, "19", "--result", "PAGE-1")
    assert r.code == 2
    assert "--result must be JSON" in r.err
    r = cli("resolve", crashed, ACTOR, "19")
    assert r.code == 2  # argparse: one of --result/--retry/--fail is required
    assert entries(crashed) == before
    assert cli("resolve", crashed, ACTOR, "19", "--retry").code == 0
    r = cli("resolve", crashed, ACTOR, "19", "--result", "1")
    assert r.code == 2
    assert "already has a decision: retry (authorized" in r.err


@pytest.mark.parametrize(
    "deep", ["[" * 2000 + "]" * 2000, '{"k":' * 2000 + "1" + "}" * 2000, "[" * 101 + "]" * 101]
)
def test_resolve_refuses_a_result_nested_too_deeply(crashed: Path, deep: str) -> None:
    """A --result nested deeper than 100 levels (2,000 was a RecursionError inside the
    JSON parser): a one-line usage error, nothing recorded; the same limit as the console."""
    before = entries(crashed)
    r = cli("resolve", crashed, ACTOR, "19", "--result", deep)
    assert r.code == 2, r.err
    _no_traceback(r.err)
    assert "--result is nested too deeply (at most 100 levels" in r.err
    assert entries(crashed) == before
    r = cli("resolve", crashed, ACTOR, "19", "--result", "NaN")  # strict JSON, as the console
    assert r.code == 2 and "--result must be strict JSON: NaN" in r.err, r.err
    assert entries(crashed) == before


# -- fork --------------------------------------------------------------------------------


def test_fork_lists_external_effects_and_refuses_without_yes(crashed: Path) -> None:
    r = cli("fork", crashed, ACTOR, "--at", "10", "--as", "incident-7-b")
    assert r.code == 1
    assert "2 external write effect(s) after seq 10" in r.out
    assert "send_email(" in r.out and "(the fork will run it again)" in r.out
    assert "page_oncall(" in r.out and "in_doubt" in r.out
    assert "--yes" in r.err
    ids = {a["actor_id"] for a in cli("actors", crashed, "--json").json_lines()}
    assert ids == {ACTOR}


def test_fork_with_yes_starts_from_the_state_at_seq(crashed: Path) -> None:
    d = crashed.parent
    r = cli(
        "fork", crashed, ACTOR, "--at", "14", "--as", "incident-7-replay", "--yes", "--by", "bob"
    )
    assert r.code == 0, r.err
    assert "page_oncall(" in r.out  # listed even when confirmed
    assert (
        "forked incident-7 at seq 14 as incident-7-replay: 14 entries copied, "
        "snapshot seq 14 copied" in r.out
    )
    actors = {a["actor_id"]: a for a in cli("actors", crashed, "--json").json_lines()}
    fork = actors["incident-7-replay"]
    assert (fork["status"], fork["last_seq"], fork["last_snapshot_seq"]) == ("idle", 14, 14)
    assert actors[ACTOR]["status"] == "in_doubt"  # the original is untouched
    assert cli("verify", crashed).code == 0  # fresh checksums under the new id
    fork_rows = entries(crashed, "incident-7-replay")
    assert [r[:3] for r in fork_rows] == [r[:3] for r in entries(crashed)[:14]]
    events = [
        x
        for x in cli("history", crashed, "incident-7-replay", "--json").json_lines()
        if x["type"] == "event"
    ]
    assert events[0]["kind"] == "forked"
    assert events[0]["detail"]["source"] == ACTOR and events[0]["detail"]["by"] == "bob"

    # a runtime runs the fork from that state: two answers so far, one more now, no page
    out = json.loads(worker(crashed, "resume-fork", "incident-7-replay", d / "fork.jsonl").stdout)
    assert len(out["state"]["answers"]) == 3
    assert out["state"]["pages"] == []
    assert [c["tool"] for c in _calls(d)].count("page_oncall") == 1
    keys = [json.loads(x)["key"] for x in (d / "fork.jsonl").read_text().splitlines() if "key" in x]
    assert keys and all(k.startswith("incident-7-replay:") for k in keys)


def test_fork_rejects_bad_arguments(crashed: Path) -> None:
    for args, text in (
        (("--at", "99", "--as", "x"), "between 1 and"),
        (("--at", "5", "--as", ACTOR), "new actor id"),
    ):
        r = cli("fork", crashed, ACTOR, *args, "--yes")
        assert r.code == 2
        assert text in r.err
    flip_byte(crashed, 3)
    r = cli("fork", crashed, ACTOR, "--at", "5", "--as", "x", "--yes")
    assert r.code == 2
    assert "seq 3 failed the checksum check" in r.err  # damage is never copied


# -- export ------------------------------------------------------------------------------


def test_export_is_complete_json_lines(crashed: Path) -> None:
    r = cli("export", crashed, ACTOR, "--raw")
    assert r.code == 0
    lines = r.json_lines()
    assert lines[0]["type"] == "actor" and lines[0]["last_seq"] == 19
    ents = [x for x in lines if x["type"] == "entry"]
    assert [e["seq"] for e in ents] == list(range(1, 20))
    assert all(e["valid"] for e in ents)
    # an auditor can recompute every checksum from the export alone (FORMAT.md [F6])
    for e in ents:
        payload = base64.b64decode(e["payload_b64"])
        assert json.loads(payload) == e["payload"]
        assert (
            _codec.entry_checksum(
                ACTOR, e["seq"], e["kind"], e["type_tag"], e["ref"], e["message_id"], payload
            )
            == e["checksum"]
        )
    (snap,) = [x for x in lines if x["type"] == "snapshot"]
    assert snap["valid"] and len(snap["state"]["answers"]) == 2
    out = crashed.parent / "audit.jsonl"
    assert cli("export", crashed, ACTOR, "-o", out).code == 0
    assert "payload_b64" not in out.read_text()
    assert len(out.read_text().splitlines()) == len(lines)


# -- HTML --------------------------------------------------------------------------------


def test_html_timeline_in_headless_chromium(crashed: Path, chromium: str, tmp_path: Path) -> None:
    page = tmp_path / "incident.html"
    r = cli("history", crashed, ACTOR, "--html", page)
    assert r.code == 0, r.err
    text = page.read_text()
    for forbidden in ("http://", "https://", "<script", "<link", "@import", "url("):
        assert forbidden not in text, forbidden  # self-contained: nothing to fetch
    profile = tmp_path / "profile"
    dom = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    import html.parser

    class Steps(html.parser.HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.steps: list[tuple[str | None, str | None]] = []
            self.calls: list[tuple[str | None, str | None]] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            a = dict(attrs)
            classes = (a.get("class") or "").split()
            if tag == "section" and "step" in classes:
                self.steps.append((a.get("data-seq"), a.get("data-status")))
            if tag == "tr" and "call" in classes:
                self.calls.append((a.get("data-intent-seq"), a.get("class")))

    parser = Steps()
    parser.feed(dom)
    assert parser.steps == [("1", "ok"), ("8", "ok"), ("15", "in_doubt")]
    assert ("19", "call c-in_doubt") in parser.calls
    assert len(parser.calls) == 6
    assert f"actorlog resolve {crashed} {ACTOR} 19" in dom
    assert "snapshot at seq 14" in dom


def test_python_m_entry_point_works(crashed: Path) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "actorlog.cli._main", "verify", str(crashed)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0
    flip_byte(crashed, 2)
    p = subprocess.run(
        [sys.executable, "-m", "actorlog.cli._main", "verify", str(crashed)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 1


def test_passwords_in_store_urls_are_not_echoed() -> None:
    from actorlog.cli._main import shown_url

    assert (
        shown_url("postgresql://ops:s3cret@db:5432/agents") == "postgresql://ops:***@db:5432/agents"
    )
    assert shown_url("sqlite:///agents.db") == "sqlite:///agents.db"
