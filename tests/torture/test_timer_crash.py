"""Torture: a runtime SIGKILLed during a durable sleep and before its timers fire (issue 14,
part 2): after a restart the sleep resumes and finishes once, and each timer's message arrives
exactly once (the worker: timer_worker.py; the actors: tests/time/agents.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests._keys import EffectId

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("seconds", "ahead"),
    [
        (1.5, None),  # the real clock: the restart waits out what is left
        (3600.0, 3700.0),  # a fake clock: an hour's sleep and timers, restarted an hour on
    ],
    ids=["real-clock", "fake-clock"],
)
def test_kill_during_sleep_and_before_timers_and_schedule_fire(
    tmp_path: Path, seconds: float, ahead: float | None
) -> None:
    db = str(tmp_path / "timers.db")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "tests.torture.timer_worker"]
    with subprocess.Popen(
        [*cmd, "start", db, str(seconds)], stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env
    ) as proc:
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "READY"
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    resume = [*cmd, "resume", db] + ([] if ahead is None else [str(ahead)])
    out = subprocess.run(resume, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["slept"] == ["start:nap", "end:nap"]  # the interrupted step finished once
    assert got["effects"] == ["sleep"]  # its wait was not logged again
    assert sorted(got["notes"]) == ["from-step", "from-system"]
    timer_ids = [i for i in got["ids"] if i.startswith("timer:")]
    assert EffectId("sender", 1, 1, prefix="timer:") in timer_ids  # under its derived id
    assert len(timer_ids) == len(set(timer_ids)) == 2
    assert got["states"] == ["fired", "fired"]
    ticks = got["ticks"]  # the schedule, across the kill: each firing logged once
    # real clock: ticks before and after the kill; fake clock: the hour's missed firings are
    # skipped (the default policy), and the schedule goes on from the restart
    assert len(ticks) >= (2 if ahead is None else 1) and len(set(ticks)) == len(ticks)
    assert all(t.startswith("schedule:tick@") for t in ticks)
