"""[F18] A log written before effects carried their task: a step whose handler made calls
from a task it spawned numbered them all in one sequence, as the handler's own. Such a log
still replays (fixture written by actorlog 49148f5: tests/upgrading/make_fan_fixture.py)."""

from __future__ import annotations

import json
import os

import pytest
from actorlog.testing import replay

from tests.upgrading.old_fan_agents import OldFan

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "fan_before_tasks.jsonl")


def test_the_fixture_has_no_task_keys() -> None:
    with open(FIXTURE) as f:
        text = f.read()
    assert '\\"task\\"' not in text and '"task"' not in text
    assert len([line for line in text.splitlines() if json.loads(line)]) == 10


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_a_concurrent_step_recorded_before_tasks_replays() -> None:
    report = await replay(FIXTURE, actors=[OldFan])
    assert report.ok, report.lines()
    assert report.steps == 1
