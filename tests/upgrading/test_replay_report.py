"""The replay report and the quarantine say what the handler did instead of the recorded
effect: when it raised, the exception (issue 24, item 16), not "the end of the step"."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from actorlog import Actor, ActorQuarantinedError, ActorSystem, Context, message, tool
from actorlog.cli._main import main
from actorlog.stores import SqliteStore
from actorlog.testing import replay

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@message(name="report.ask")
@attrs.frozen
class Ask:
    q: str


@attrs.define
class Seen:
    n: int = 0


@tool(effect="read", name="report.first")
async def first(q: str) -> str:
    return f"first {q}"


@tool(effect="read", name="report.second")
async def second(q: str) -> str:
    return f"second {q}"


class Before(Actor[Seen], name="report.actor"):
    async def receive(self, ctx: Context, msg: Ask) -> str:
        return await ctx.call(first, msg.q) + await ctx.call(second, msg.q)


class Broken(Actor[Seen]):
    __actorlog_tag__ = "report.actor"

    async def receive(self, ctx: Context, msg: Ask) -> str:
        got = await ctx.call(first, msg.q)
        raise KeyError(f"no {got!r} here")


async def test_the_report_shows_the_exception_the_handler_raised(tmp_path: Path) -> None:
    db = str(tmp_path / "r.db")
    async with ActorSystem(SqliteStore(db), actors=[Before]) as system:
        await (await system.spawn(Before, "a")).ask(Ask("x"))
    report = await replay(db, actors=[Broken])
    assert not report.ok
    (div,) = report.divergences
    assert div.got == "the handler raising KeyError: \"no 'first x' here\"", div.got
    assert "the end of the step" not in "\n".join(report.lines())
    assert 'report.second("x")' in div.expected
    async with ActorSystem(SqliteStore(db), actors=[Broken]) as system:
        with pytest.raises(ActorQuarantinedError) as err:
            await system.spawn(Broken, "a")
    assert "the handler raising KeyError" in str(err.value)


def test_replay_check_help_lists_exit_1_for_a_divergence(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["replay-check", "--help"])
    assert done.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Exit 0: every history replays; 1: some actor diverges; 2:" in out
    assert "1 verify found damage, replay-check found a divergence" in out
