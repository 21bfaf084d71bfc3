"""A pydantic-ai agent with several tools, run in a worker process that is SIGKILLed at
random (seeded) points and restarted, ends with the same outputs and message history of
each of the conversation's three runs as an uninterrupted run; the model was asked once per
recorded request (plus at most the one in flight at each kill), and the idempotent tools
wrote once per idempotency key."""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from tests._payload import payload_of

WORKER = Path(__file__).with_name("crash_worker.py")
_STEPS = "SELECT payload FROM entries WHERE kind = 'step' ORDER BY seq"
#: model requests per prompt (5 tool-calling responses + the answer) x 3 prompts
REQUESTS = 18


def _env(ledger: Path) -> dict[str, str]:
    return dict(os.environ, TRAVEL_LEDGER=str(ledger), TRAVEL_ECHO="1")


def _run_to_end(store: Path, ledger: Path) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, str(WORKER), str(store)],
        env=_env(ledger),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("DONE ")]
    result: dict[str, Any] = json.loads(line[5:])
    return result


def _run_and_kill(store: Path, ledger: Path, after_effects: int) -> bool:
    """Start the worker, SIGKILL it after it reports ``after_effects`` effects; False if it
    finished first."""
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), str(store)],
        env=_env(ledger),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    seen = 0
    killed = False
    for line in proc.stdout:
        if line.startswith("[effect]"):
            seen += 1
            if seen == after_effects:
                proc.send_signal(signal.SIGKILL)
                killed = True
                break
    proc.stdout.close()
    proc.wait(timeout=60)
    return killed and proc.returncode == -signal.SIGKILL


def _ledger(ledger: Path, table: str) -> list[tuple[str, str]]:
    with closing(sqlite3.connect(ledger)) as db:
        rows = db.execute(f"SELECT key, value FROM {table}").fetchall()
    return [(str(k), str(v)) for k, v in rows]


#: each worker start imports pydantic-ai (~3 s), so one seeded schedule of kills per run;
#: ACTORLOG_PAI_SEED picks another.
SEED = int(os.environ.get("ACTORLOG_PAI_SEED", "7"))


_INCARNATION = re.compile(r":[0-9a-f]{16}:[0-9]+:")
#: a run id is "{actor}:{seq of its message}"
_RUN_ID = re.compile(r'("run_id": "[^"]*:)[0-9]+"')


def _same_keys(value: Any) -> Any:
    """``value`` with the incarnation id of every idempotency key (FORMAT.md [F13]) replaced:
    the reference run is another actor log, so its keys hold another incarnation, and its
    seqs differ where a crash added entries (an in-doubt re-run's ``attempt`` decision)."""
    plain = _INCARNATION.sub(":<incarnation>:<seq>:", json.dumps(value))
    return json.loads(_RUN_ID.sub(r'\1<seq>"', plain))


def test_killed_agent_resumes_with_same_history_and_no_repeated_work(tmp_path: Path) -> None:
    seed = SEED
    reference = _run_to_end(tmp_path / "ref.db", tmp_path / "ref-ledger.db")
    ref_calls = Counter(
        _same_keys(k) for k, _ in _ledger(tmp_path / "ref-ledger.db", "model_calls")
    )
    assert len(ref_calls) == REQUESTS and set(ref_calls.values()) == {1}

    rng = random.Random(seed)
    store, ledger = tmp_path / "agents.db", tmp_path / "ledger.db"
    kills = 0
    for _ in range(5):
        # effects per full run: 18 model calls + 3 x (search, weather, book, notify) = 30
        if _run_and_kill(store, ledger, rng.randint(1, 10)):
            kills += 1
    assert kills >= 1
    final = _run_to_end(store, ledger)

    assert _same_keys(final["outputs"]) == _same_keys(reference["outputs"])
    assert _same_keys(final["messages"]) == _same_keys(reference["messages"])
    # each run's conversation continues the one before; the log holds it once ([F23])
    conversations = final["messages"]
    assert [len(c) for c in conversations] == sorted({len(c) for c in conversations})
    assert all(b[: len(a)] == a for a, b in itertools.pairwise(conversations))
    with closing(sqlite3.connect(store)) as db:
        replies = [payload_of("step", p)["reply"] for (p,) in db.execute(_STEPS)]
    assert len(replies) == 3 and all("messages" not in r and r["tail"] for r in replies)
    assert final["usage"] == reference["usage"]

    calls = Counter(_same_keys(k) for k, _ in _ledger(ledger, "model_calls"))
    assert set(calls) == set(ref_calls)  # every recorded request, no other
    repeated = sum(n - 1 for n in calls.values())
    assert repeated <= kills, calls  # at most the request in flight at each kill

    # every effect (model request or tool execution) ran once, except at most those in
    # flight at each kill: the tool calls of one response run at once (book and weather:
    # two at most)
    tables = ("model_calls", "reads", "bookings", "notifications")
    ref_total = sum(len(_ledger(tmp_path / "ref-ledger.db", t)) for t in tables)
    total = sum(len(_ledger(ledger, t)) for t in tables)
    assert ref_total <= total <= ref_total + 2 * kills

    bookings = _ledger(ledger, "bookings")
    notifications = _ledger(ledger, "notifications")
    # the idempotent tools may re-run with the same key when in doubt; never with a new key
    assert len({k for k, _ in bookings}) == 3, bookings
    assert len({k for k, _ in notifications}) == 3, notifications
    ref_bookings = {_same_keys(k) for k, _ in _ledger(tmp_path / "ref-ledger.db", "bookings")}
    assert {_same_keys(k) for k, _ in bookings} == ref_bookings
