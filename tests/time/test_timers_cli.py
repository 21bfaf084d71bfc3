"""Operators see timers and schedules: ``actorlog timers STORE``, ``ops.timers`` and the
sleeps and timers in ``actorlog history``."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest
from actorlog import ActorSystem, ops
from actorlog.cli._main import main
from actorlog.stores import SqliteStore

from .._keys import EffectId
from .agents import Later, Nap, Note, Recorder, Sender, Sleeper

#: a daily schedule about 12 hours from now, so it is always due after the timer set an hour
#: ahead (a fixed "0 9 * * *" sorted first between 08:00 and 09:00 UTC)
CRON = f"0 {(datetime.now(UTC).hour + 12) % 24} * * *"


async def _setup(db: Path) -> None:
    async with ActorSystem(SqliteStore(db), actors=[Sleeper, Sender, Recorder]) as system:
        await system.ref(Sleeper, "s").ask(Nap(0.01, "a"))
        await system.ref(Sender, "snd").ask(Later("rec", "x", 3600))
        await system.schedule("daily-report", system.ref(Recorder, "rec"), Note("r"), cron=CRON)
    async with ops.opened(f"sqlite:///{db}") as store:
        assert [t.timer_id for t in await ops.timers(store, "rec")] == [
            EffectId("snd", 1, 1),
            "schedule:daily-report",
        ]


def test_timers_command_history_and_ops(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "t.db"
    anyio.run(_setup, db)
    capsys.readouterr()
    assert main(["timers", str(db), "--color", "never"]) == 0
    text = capsys.readouterr().out
    assert "schedule:daily-report" in text and f"cron {CRON}, missed=skip" in text
    assert re.search(r"snd/[0-9a-f]{16}/1/1", text) and "pending" in text
    assert main(["timers", str(db), "--json", "--actor", "rec"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(x["kind"], x["state"]) for x in lines] == [
        ("timer", "pending"),
        ("schedule", "pending"),
    ]
    assert lines[1]["recurrence"] == {"cron": CRON, "missed": "skip"}
    assert main(["history", str(db), "s", "--color", "never"]) == 0
    assert "sleep slept until " in capsys.readouterr().out
    assert main(["history", str(db), "snd", "--color", "never"]) == 0
    assert "send_later send tests.time.agents.Note to rec at " in capsys.readouterr().out
