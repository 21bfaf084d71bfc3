"""``actorlog history``, its HTML export and the ``ops`` API show which task of a step made
each call, when each call ran, and which calls overlapped (issue 25, "The proof"), in the
same words (``actorlog._views.term.concurrency_text``). The log is written entry by entry
(tests/cli/_fanout.py); tests/runtime/test_concurrent_surface.py has the same from a real
concurrent handler."""

from __future__ import annotations

import html.parser
import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from actorlog import ActorSystem, idempotency_key, ops
from actorlog._journal.records import EffectRecord, MessageRecord
from actorlog.stores import SqliteStore

from tests.cli._fanout import (
    ACTOR,
    T0,
    Fanned,
    Go,
    reset_barrier,
    wide_rows,
    write_fanout_log,
    write_log,
)
from tests.cli._support import cli
from tests.runtime.concurrent_agents import expected

pytestmark = pytest.mark.anyio

UTC = {"TZ": "UTC"}

#: the words every surface shows under each call of the concurrent steps, by intent seq
WORDS = {
    2: "handler; ran 03:04:05.010 to 03:04:05.020",
    4: "task 0; ran 03:04:05.030 to 03:04:05.135; parallel with #5",
    5: "task 1; ran 03:04:05.031 to 03:04:05.130; parallel with #4",
    9: "task 0; ran 03:04:05.140 to 03:04:05.250",
    13: "task 0; started 03:04:06.010, no outcome yet; parallel with #14",
    14: "task 1.0; started 03:04:06.011, no outcome yet; parallel with #13",
}


@pytest.fixture
def fanout(tmp_path: Path) -> Path:
    db = tmp_path / "fan.db"
    write_fanout_log(db)
    return db


async def test_ops_history_returns_the_task_the_times_and_the_overlaps(fanout: Path) -> None:
    store = SqliteStore(fanout)
    await store.open()
    try:
        h = await ops.history(store, ACTOR)
    finally:
        await store.close()
    assert h.actor.status == "running"  # an in-doubt read: the runtime settles it
    assert [(i.intent_seq, i.task) for i in h.actor.in_doubt] == [(13, "0"), (14, "1.0")]
    first, second = h.steps
    assert first.concurrent and second.concurrent
    got = {c.intent_seq: (c.task, c.parallel_with, c.ended_at is not None) for c in first.calls}
    assert got == {
        2: (None, [], True),
        4: ("0", [5], True),
        5: ("1", [4], True),
        9: ("0", [], True),
    }
    assert [(e.seq, e.name, e.task) for e in first.effects] == [(6, "now", "1")]
    calls = {c.intent_seq: c for c in first.calls}
    assert calls[4].at is not None and calls[4].ended_at is not None
    assert calls[4].ended_at - calls[4].at == pytest.approx(0.105)
    assert [(c.task, c.parallel_with, c.ended_at) for c in second.calls] == [
        ("0", [14], None),
        ("1.0", [13], None),
    ]


def test_history_prints_the_task_and_the_overlaps_under_each_call(fanout: Path) -> None:
    r = cli("history", fanout, ACTOR, env=UTC)
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    for seq, words in WORDS.items():
        at = next(i for i, x in enumerate(lines) if x.lstrip().startswith(f"{seq} "))
        assert lines[at + 1].strip() == words, r.out
    assert any(x.strip().endswith("(task 1)") and x.strip().startswith("6 ") for x in lines)


def test_history_json_carries_the_typed_fields(fanout: Path) -> None:
    r = cli("history", fanout, ACTOR, "--json", env=UTC)
    assert r.code == 0, r.err
    steps = [x for x in r.json_lines() if x.get("type") == "step"]
    calls = {c["intent_seq"]: c for st in steps for c in st["calls"]}
    assert {n: (c["task"], c["parallel_with"]) for n, c in calls.items()} == {
        2: (None, []),
        4: ("0", [5]),
        5: ("1", [4]),
        9: ("0", []),
        13: ("0", [14]),
        14: ("1.0", [13]),
    }
    assert calls[5]["ended_at"] == pytest.approx(calls[5]["at"] + 0.099)
    assert [st["concurrent"] for st in steps] == [True, True]


class _Calls(html.parser.HTMLParser):
    """The call rows of a page: intent seq -> (data-task, data-parallel-with, words)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[int, list[str]] = {}
        self.concurrent: list[str] = []
        self._seq: int | None = None
        self._in_words = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "section" and a.get("data-concurrent") == "true":
            self.concurrent.append(a.get("data-seq") or "")
        if tag == "tr" and "call" in classes:
            self._seq = int(a["data-intent-seq"] or 0)
            self.rows[self._seq] = [a.get("data-task") or "", a.get("data-parallel-with") or ""]
        if tag == "div" and "conc" in classes and self._seq is not None:
            self._in_words = True
            self.rows[self._seq].append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "div":
            self._in_words = False

    def handle_data(self, data: str) -> None:
        if self._in_words and self._seq is not None:
            self.rows[self._seq][-1] += data


def test_html_export_shows_the_same_words(fanout: Path, tmp_path: Path) -> None:
    page = tmp_path / "fan.html"
    r = cli("history", fanout, ACTOR, "--html", page, env=UTC)
    assert r.code == 0, r.err
    p = _Calls()
    p.feed(page.read_text())
    assert p.concurrent == ["1", "12"]
    assert p.rows == {
        2: ["", "", WORDS[2]],
        4: ["0", "5", WORDS[4]],
        5: ["1", "4", WORDS[5]],
        9: ["0", "", WORDS[9]],
        13: ["0", "14", WORDS[13]],
        14: ["1.0", "13", WORDS[14]],
    }


def test_a_step_without_concurrency_prints_as_before(crashed: Path, tmp_path: Path) -> None:
    """The crashed on-call store: every call awaited before the next, no task field. No
    concurrency line, no task column: the output of a sequential actor is unchanged."""
    r = cli("history", crashed, "incident-7")
    assert r.code == 0, r.err
    assert "handler;" not in r.out and "parallel with" not in r.out and "task " not in r.out
    page = tmp_path / "seq.html"
    assert cli("history", crashed, "incident-7", "--html", page).code == 0
    p = _Calls()
    p.feed(page.read_text())
    assert p.concurrent == [] and p.rows and all(v == ["", ""] for v in p.rows.values())


async def test_a_real_fan_out_shows_its_tasks_and_overlaps(tmp_path: Path) -> None:
    """The issue's example run for real on a SQLite file: four tasks of a task group, each
    making two dependent calls; the first call of each task waits until all four run (a
    barrier), so they overlap by construction. Every surface names the tasks and the
    overlaps."""
    reset_barrier()
    db = tmp_path / "real.db"
    async with ActorSystem(SqliteStore(db), actors=[Fanned]) as system:
        ref = await system.spawn(Fanned, "real-1")
        with anyio.fail_after(10):
            assert await ref.ask(Go("go"), message_id="m1") == "ok"
    store = SqliteStore(db)
    await store.open()
    try:
        h = await ops.history(store, "real-1")
    finally:
        await store.close()
    (step,) = h.steps
    assert step.status == "ok" and step.concurrent
    first = [c for c in step.calls if c.tool == "write_a"]
    second = [c for c in step.calls if c.tool == "write_b"]
    assert sorted(str(c.task) for c in first) == ["0", "1", "2", "3"]
    by_task = {c.task: c for c in second}
    for c in first:  # every first call overlapped the other three
        others = {o.intent_seq for o in first if o is not c}
        assert others <= set(c.parallel_with)
        assert by_task[c.task].args == [f"b{c.task}-w-a{c.task}"]  # its task's own follow-up
    r = cli("history", db, "real-1")
    assert r.code == 0, r.err
    for c in first:
        assert f"task {c.task}; ran " in r.out
    assert "parallel with #" in r.out


async def test_a_fork_shows_the_keys_its_tasks_calls_run_with(fanout: Path) -> None:
    """A fork settles the copied in-doubt calls with keys of its own id and incarnation;
    ``history`` and ``actor_status`` show those keys, and a task's call keeps its task in
    the key (two tasks' first calls must not share one key)."""
    store = SqliteStore(fanout)
    await store.open()
    try:
        await ops.fork(store, ACTOR, at=14, new_id="fan-2", yes=True)
        h = await ops.history(store, "fan-2")
        status = await ops.actor_status(store, "fan-2")
    finally:
        await store.close()
    step = h.steps[1]
    incarnation = h.steps[1].calls[0].key.split(":")[1]
    want = {
        c.intent_seq: idempotency_key("fan-2", 12, 0, incarnation=incarnation, task=str(c.task))
        for c in step.calls
    }
    assert {c.intent_seq: c.key for c in step.calls} == want
    assert len(set(want.values())) == 2
    assert {i.intent_seq: (i.key, i.task) for i in status.in_doubt} == {
        13: (want[13], "0"),
        14: (want[14], "1.0"),
    }


def test_a_fan_out_sigkilled_mid_calls_and_resumed_shows_every_task(tmp_path: Path) -> None:
    """The issue's example in a real process (tests/runtime/concurrent_worker.py), SIGKILLed
    at the fourth tool start (the four first calls' intents are durable, no result is), then
    resumed by another process: ``history`` shows the recovery, then the step with each
    call's task, the four first calls overlapping, and each task's second call after its
    first."""
    root = Path(__file__).resolve().parents[2]
    db, ledger = tmp_path / "agents.db", tmp_path / "ledger.txt"

    def run(kill_at: int) -> subprocess.CompletedProcess[str]:
        args = [str(db), str(ledger), "asyncio", str(kill_at)]
        return subprocess.run(
            [sys.executable, "-m", "tests.runtime.concurrent_worker", *args],
            env=dict(os.environ, PYTHONPATH=str(root)),
            cwd=root,
            capture_output=True,
            text=True,
            timeout=120,
        )

    assert run(4).returncode == -9
    second = run(0)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout.strip().splitlines()[-1]) == {"reply": expected()}
    r = cli("history", db, "fan", "--json")
    assert r.code == 0, r.err
    items = r.json_lines()
    (step,) = [x for x in items if x.get("type") == "step"]
    assert step["status"] == "ok" and step["concurrent"] is True
    kinds = [x.get("kind") or x.get("type") for x in items]
    assert kinds.index("recovered") < kinds.index("step")
    first = {c["task"]: c for c in step["calls"] if c["args"][0].startswith("a")}
    then = {c["task"]: c for c in step["calls"] if c["args"][0].startswith("b")}
    assert sorted(first) == sorted(then) == ["0", "1", "2", "3"]
    for task, c in first.items():
        others = {o["intent_seq"] for t, o in first.items() if t != task}
        assert others <= set(c["parallel_with"])  # all four ran (and re-ran) together
        assert c["result_seq"] < then[task]["intent_seq"]  # its task's next call came after
    text = cli("history", db, "fan")
    assert text.code == 0, text.err
    assert all(f"task {t}; ran " in text.out for t in first)


def test_a_wide_fan_out_names_a_bounded_number_of_overlapping_calls(tmp_path: Path) -> None:
    """Twelve calls at the same time: each overlapped eleven; the line under each names the
    first eight and counts the rest (lines and console pages must not grow with the square
    of the width), while ``--json`` has them all."""
    db = tmp_path / "wide.db"
    write_log(db, "wide-1", wide_rows(12))
    r = cli("history", db, "wide-1", env=UTC)
    assert r.code == 0, r.err
    assert (
        "task 0; ran 03:04:05.010 to 03:04:06.000; parallel with #3, #4, #5, #6, #7, #8, #9, "
        "#10 and 3 more"
    ) in r.out
    calls = [
        c for x in cli("history", db, "wide-1", "--json").json_lines() for c in x.get("calls", [])
    ]
    assert [len(c["parallel_with"]) for c in calls] == [11] * 12
    page = tmp_path / "wide.html"
    assert cli("history", db, "wide-1", "--html", page, env=UTC).code == 0
    p = _Calls()
    p.feed(page.read_text())
    assert p.rows[2][1] == "3 4 5 6 7 8 9 10"


def test_every_task_sleeping_in_a_running_step_is_shown_waiting(tmp_path: Path) -> None:
    """Two tasks of a step in progress each sleep: both sleeps are what the step waits in
    now (``sleeps until``), not only the last entry of the step."""
    until = T0 + 3600 * 24 * 365 * 100  # far in the future: still waiting
    rows = [
        ("message", "demo.Ask", 0, "m1", MessageRecord({"q": "nap"}, at=T0).payload()),
        ("effect", "sleep", 1, None, EffectRecord(0, {"until": until}, T0, "0").payload()),
        ("effect", "sleep", 1, None, EffectRecord(0, {"until": until}, T0, "1").payload()),
    ]
    db = tmp_path / "nap.db"
    write_log(db, "nap-1", rows)
    r = cli("history", db, "nap-1")
    assert r.code == 0, r.err
    assert r.out.count("sleeps until") == 2 and "slept until" not in r.out, r.out
    page = tmp_path / "nap.html"
    assert cli("history", db, "nap-1", "--html", page).code == 0
    text = page.read_text()
    assert text.count("sleeps until") == 2 and "slept until" not in text
