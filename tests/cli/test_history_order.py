"""``actorlog history`` prints events in log order: the recovery that resumed an interrupted
step comes before that step's end (issue 29 item 6)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.cli._support import cli, worker


def _resumed(crashed: Path) -> Path:
    """The crashed on-call store with its in-doubt page resolved and the step finished by a
    runtime that recovered it."""
    r = cli("resolve", crashed, "incident-7", "19", "--result", '"PAGE-9"', "--reason", "seen")
    assert r.code == 0, r.err
    worker(crashed, "resume", crashed.parent / "calls.jsonl")
    return crashed


def test_the_recovered_event_comes_before_the_step_it_resumed(crashed: Path) -> None:
    db = _resumed(crashed)
    r = cli("history", db, "incident-7")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    recovered = [i for i, x in enumerate(lines) if "[recovered]" in x]
    resolved = [i for i, x in enumerate(lines) if "[resolved]" in x]
    last_reply = max(i for i, x in enumerate(lines) if re.match(r"\s+23\s", x))
    third = next(i for i, x in enumerate(lines) if "message q-3" in x)
    assert recovered and resolved
    # the step that finished after the recovery is shown after it, with its last entry
    assert resolved[0] < recovered[-1] < third < last_reply, r.out


def test_the_json_history_lists_the_recovery_before_the_step_it_resumed(crashed: Path) -> None:
    db = _resumed(crashed)
    r = cli("history", db, "incident-7", "--json")
    assert r.code == 0, r.err
    items = [json.loads(x) for x in r.out.splitlines() if x.strip()]
    kinds = [
        ("recovered" if it.get("kind") == "recovered" else f"step {it['message_seq']}")
        for it in items
        if it.get("kind") == "recovered" or "message_seq" in it
    ]
    assert kinds.index("recovered") < kinds.index("step 15"), kinds
