"""The replay tester checks concurrent handlers too (issue 25): a step whose tool calls come
from the tasks of a task group replays for the same code whichever task finished first (on
asyncio and trio); a changed concurrent handler is reported naming the task that asked for
another effect; a step interrupted in the middle of its fan-out is replayed as far as its
log goes; the CLI prints the task."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import attrs
import pytest
from actorlog import Actor, ActorSystem, Context, message, tool
from actorlog.cli._main import main
from actorlog.stores import SqliteStore
from actorlog.testing import replay

pytestmark = pytest.mark.anyio

#: per argument, how long the tool takes (seconds): the tasks finish in reverse order
LATENCY = {0: 0.03, 1: 0.02, 2: 0.01, 3: 0.0}
#: arguments whose call blocks until the test releases it (a step interrupted mid-run)
HOLD: set[int] = set()


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@message(name="replay_conc.fan")
@attrs.frozen
class Fan:
    n: int


@attrs.define
class Got:
    values: list[str] = attrs.Factory(list)


@tool(effect="read", name="replay_conc.fetch")
async def fetch(i: int) -> str:
    if i in HOLD:
        await anyio.sleep_forever()
    await anyio.sleep(LATENCY.get(i, 0.0))
    return f"f{i}"


@tool(effect="read", name="replay_conc.use")
async def use(value: str) -> str:
    return value.upper()


async def _fan_out(ctx: Context, n: int, second: str) -> list[str]:
    """``n`` tasks, each a fetch then a call that depends on it (the issue's example)."""
    out: dict[int, str] = {}

    async def one(i: int) -> None:
        got = await ctx.call(fetch, i)
        out[i] = await ctx.call(use, f"{second}{got}")

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)
    return [out[i] for i in range(n)]


class FanOut(Actor[Got], name="replay_conc.actor"):
    async def receive(self, ctx: Context, msg: Fan) -> list[str]:
        self.state.values = await _fan_out(ctx, msg.n, "")
        return self.state.values


class Changed(Actor[Got]):
    """The next version: task 2's second call changed its argument."""

    __actorlog_tag__ = "replay_conc.actor"

    async def receive(self, ctx: Context, msg: Fan) -> list[str]:
        out: dict[int, str] = {}

        async def one(i: int) -> None:
            got = await ctx.call(fetch, i)
            out[i] = await ctx.call(use, f"v2-{got}" if i == 2 else got)

        async with anyio.create_task_group() as tg:
            for i in range(msg.n):
                tg.start_soon(one, i)
        return [out[i] for i in range(msg.n)]


async def _record(db: str, n: int = 4) -> None:
    async with ActorSystem(SqliteStore(db), actors=[FanOut]) as system:
        ref = await system.spawn(FanOut, "fan")
        assert await ref.ask(Fan(n), message_id="q1") == [f"F{i}" for i in range(n)]
        assert await ref.ask(Fan(2), message_id="q2") == ["F0", "F1"]


async def test_a_concurrent_handler_replays_for_the_same_code(tmp_path: Path) -> None:
    db = str(tmp_path / "fan.db")
    await _record(db)
    report = await replay(db, actors=[FanOut])
    report.check()
    assert (report.actors, report.steps) == (1, 2)


async def test_a_changed_concurrent_handler_is_reported_naming_the_task(tmp_path: Path) -> None:
    db = str(tmp_path / "fan.db")
    await _record(db)
    report = await replay(db, actors=[Changed])
    assert not report.ok
    (div,) = report.divergences
    assert div.step_seq == 1
    assert div.task == "2", div  # the third task the handler started
    assert div.index == 1  # its second effect
    assert 'replay_conc.use("f2")' in div.expected
    assert 'replay_conc.use("v2-f2")' in div.got
    assert "task 2" in str(div)
    assert "task 2" in div.error


async def test_a_step_interrupted_mid_fan_out_replays_as_far_as_its_log(tmp_path: Path) -> None:
    """A step whose task 1 is still in its tool when the runtime stops (its intent open;
    the other tasks' calls done): the tester replays it up to there and stops, ok."""
    db = str(tmp_path / "fan.db")
    HOLD.add(1)
    try:
        async with ActorSystem(SqliteStore(db), actors=[FanOut], shutdown_grace=0) as system:
            ref = await system.spawn(FanOut, "fan")
            await ref.send(Fan(3), message_id="q1")
            with anyio.fail_after(10):
                # tasks 0 and 2 made both their calls (a result is made durable by the
                # next commit: the intents are the ones to wait for), task 1 is held
                while len(await system.store.read("fan", kinds=["intent"])) < 5:
                    await anyio.sleep(0.01)
    finally:
        HOLD.discard(1)
    report = await replay(db, actors=[FanOut])
    report.check()
    assert (report.actors, report.steps) == (1, 1)
    changed = await replay(db, actors=[Changed])
    (div,) = changed.divergences  # task 2 ran its second call: the change is seen
    assert div.task == "2", div


async def test_replay_check_cli_names_the_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "fan.db")
    await _record(db)
    spec = f"{__name__}:Changed"
    code = await anyio.to_thread.run_sync(main, ["replay-check", db, "--actors", spec])
    assert code == 1
    out = capsys.readouterr().out
    assert "DIVERGED fan (replay_conc.actor) step seq 1, effect #1 of task 2:" in out, out
    args = ["replay-check", db, "--actors", spec, "--json"]
    assert await anyio.to_thread.run_sync(main, args) == 1
    (line,) = [json.loads(x) for x in capsys.readouterr().out.splitlines() if '"task"' in x]
    assert line["task"] == "2", line
