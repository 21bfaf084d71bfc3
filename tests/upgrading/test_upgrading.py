"""Changing handler code safely (issue 15): version gates, the replay tester against a
history exported from an older handler (``fixtures/researcher_v1.jsonl``), and restarting an
actor quarantined for non-determinism once the code is fixed."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from actorlog import (
    ActorNotFoundError,
    ActorQuarantinedError,
    ActorSystem,
    ConfigurationError,
    Context,
    NonDeterminismError,
    ops,
)
from actorlog.cli._main import main
from actorlog.stores import SqliteStore
from actorlog.testing import replay

from .agents import (
    CALLS,
    HANG_ONCE,
    Question,
    ResearcherUngated,
    ResearcherV1,
    ResearcherV2,
    search,
)

pytestmark = pytest.mark.anyio

FIXTURE = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "fixtures", "researcher_v1.jsonl"
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    CALLS.clear()
    HANG_ONCE.clear()
    yield
    CALLS.clear()
    HANG_ONCE.clear()


async def record_v1(path: str, *questions: str) -> None:
    async with ActorSystem(SqliteStore(path), actors=[ResearcherV1]) as system:
        ref = await system.spawn(ResearcherV1, "r1")
        for q in questions:
            await ref.ask(Question(q), message_id=q)


async def effects(path: str, actor_id: str) -> list[str]:
    async with ops.opened("sqlite:///" + path) as store:
        return [f"{r.kind}:{r.type_tag}" for r in await store.read(actor_id)]


# -- version gates ----------------------------------------------------------------------


async def test_a_gate_replays_old_steps_on_the_old_branch_and_new_steps_take_the_new(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "a.db")
    await record_v1(db, "tides", "moons")
    CALLS.clear()
    async with ActorSystem(SqliteStore(db), actors=[ResearcherV2]) as system:
        ref = await system.spawn(ResearcherV2, "r1")
        assert CALLS == []  # the two old steps replayed, from the log, on the old branch
        assert await ref.ask(Question("tides"), message_id="tides") == "found tides"
        assert await ref.ask(Question("rings")) == "found rings + details of rings"
    assert CALLS == ["search:rings", "lookup:rings"]
    kinds = await effects(db, "r1")
    assert "effect:version" in kinds  # the new step recorded the version it took
    # and every step replays again with the new code, none diverging, no tool run
    CALLS.clear()
    async with ActorSystem(SqliteStore(db), actors=[ResearcherV2]) as system:
        await system.spawn(ResearcherV2, "r1")
        rec = system.last_recovery("r1")
        assert rec is not None and rec.steps_replayed == 3 and system.status("r1") == "idle"
    assert CALLS == []


async def test_an_actor_caught_mid_step_by_the_upgrade_finishes_on_the_new_branch(
    tmp_path: Path,
) -> None:
    """The worked upgrade of docs/upgrading.md: a lookup is added while an actor is
    mid-step (its search logged, no result). The new code re-runs the search (a read) and,
    past the log's end, takes the new branch."""
    db = str(tmp_path / "mid.db")
    HANG_ONCE.add("comets")
    async with ActorSystem(SqliteStore(db), actors=[ResearcherV1], shutdown_grace=0.1) as system:
        ref = await system.spawn(ResearcherV1, "r1")
        await ref.send(Question("comets"), message_id="comets")
        with anyio.fail_after(5):
            while CALLS != ["search:comets"]:
                await anyio.sleep(0.01)
    CALLS.clear()
    async with ActorSystem(SqliteStore(db), actors=[ResearcherV2]) as system:
        ref2 = system.ref(ResearcherV2, "r1")
        with anyio.fail_after(5):
            got = await ref2.ask(Question("comets"), message_id="comets")
    assert got == "found comets + details of comets"
    assert CALLS == ["search:comets", "lookup:comets"]


async def test_a_recorded_version_above_max_is_non_determinism(tmp_path: Path) -> None:
    """Rolling back to code whose gate has a lower max than the log recorded: stopped."""
    db = str(tmp_path / "v.db")
    async with ActorSystem(SqliteStore(db), actors=[ResearcherV2]) as system:
        ref = await system.spawn(ResearcherV2, "r1")
        await ref.ask(Question("tides"))

    class RolledBack(ResearcherUngated):
        __actorlog_tag__ = "upgrade.researcher"

        async def receive(self, ctx: Context, msg: Question) -> str:
            await ctx.call(search, msg.q)
            ctx.version("add-lookup", default=1, max=1)
            return "x"

    async with ActorSystem(SqliteStore(db), actors=[RolledBack]) as system:
        with pytest.raises(ActorQuarantinedError) as info:
            await system.spawn(RolledBack, "r1")
    cause = info.value.reason
    assert isinstance(cause, NonDeterminismError)
    assert "version 2 of 'add-lookup'" in str(cause) and "from 1 to 1" in str(cause)


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (("",), {}, "non-empty str"),
        (("x",), {"default": 3, "max": 2}, "default <= max"),
        (("x",), {"default": 1, "max": 2.0}, "must be ints"),
    ],
)
async def test_bad_version_gate_arguments_are_refused(
    tmp_path: Path, args: tuple[object, ...], kwargs: dict[str, object], match: str
) -> None:
    from actorlog import Actor

    from .agents import Notes

    class Gate(Actor[Notes]):
        __actorlog_tag__ = "upgrade.gate"

        async def receive(self, ctx: Context, msg: Question) -> str:
            try:
                ctx.version(*args, **kwargs)  # type: ignore[arg-type]
            except ConfigurationError as exc:
                return str(exc)
            return "accepted"

    async with ActorSystem(SqliteStore(str(tmp_path / "g.db")), actors=[Gate]) as system:
        ref = await system.spawn(Gate, "g")
        got = await ref.ask(Question("q"))
    assert match in got


# -- the replay tester ------------------------------------------------------------------


async def test_the_exported_v1_history_replays_against_the_gated_code() -> None:
    report = await replay(FIXTURE, actors=[ResearcherV2])
    assert report.ok, report.lines()
    assert (report.actors, report.steps, report.skipped) == (1, 2, [])
    report.check()
    assert CALLS == []  # no tool ran


async def test_the_exported_v1_history_diverges_from_the_ungated_code() -> None:
    report = await replay(FIXTURE, actors=[ResearcherUngated])
    assert not report.ok
    (d,) = report.divergences
    assert (d.actor_id, d.actor_type, d.step_seq, d.index) == ("r1", "upgrade.researcher", 1, 1)
    assert d.expected == "the end of the step"
    assert d.got == 'upgrade.lookup("tides")'
    assert "r1 (upgrade.researcher) step seq 1, effect #1" in str(d)
    with pytest.raises(AssertionError, match="replay diverged"):
        report.check()
    assert CALLS == []


async def test_replay_reads_a_store_and_never_writes_it(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    await record_v1(db, "tides", "moons")
    HANG_ONCE.add("comets")  # and one actor mid-step: replayed up to its log's end
    async with ActorSystem(SqliteStore(db), actors=[ResearcherV1], shutdown_grace=0.1) as system:
        ref = await system.spawn(ResearcherV1, "r2")
        await ref.send(Question("comets"))
        with anyio.fail_after(5):
            while "search:comets" not in CALLS:
                await anyio.sleep(0.01)
    CALLS.clear()
    before = hashlib.sha256(Path(db).read_bytes()).hexdigest()
    good = await replay(db, actors=[ResearcherV2])
    assert good.ok and good.actors == 2 and good.steps == 3, good.lines()
    bad = await replay("sqlite:///" + db, actors=[ResearcherUngated])
    assert [d.actor_id for d in bad.divergences] == ["r1"]  # r2's search has no result yet
    store = SqliteStore(db, read_only=True)
    await store.open()
    try:
        only = await replay(store, actors=[ResearcherV2], actor_ids=["r2"])
    finally:
        await store.close()
    assert only.actors == 1 and only.steps == 1
    assert hashlib.sha256(Path(db).read_bytes()).hexdigest() == before
    assert CALLS == []


async def test_replay_skips_actors_whose_class_is_not_given() -> None:
    from .agents import Notes

    report = await replay(FIXTURE, actors=[], messages=[Notes])
    assert report.ok and report.actors == 0
    assert report.skipped == [("r1", "class upgrade.researcher not given in actors=[...]")]


@pytest.mark.parametrize(
    "line",
    [
        '{"hello": 1}',
        '{"k":' * 2000 + "1" + "}" * 2000,
        '{"type": ' + "[" * 2000 + "]" * 2000 + "}",
    ],
)
async def test_a_file_that_is_not_an_export_is_refused(tmp_path: Path, line: str) -> None:
    """Also a line nested 2,000 levels deep (a RecursionError from the JSON parser)."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text(line + "\n")
    with pytest.raises(ConfigurationError, match="not an 'actorlog export' line") as err:
        await replay(str(bad), actors=[ResearcherV2])
    assert len(str(err.value)) < 600


def test_replay_check_command_exits_1_on_divergence(capsys: pytest.CaptureFixture[str]) -> None:
    ok = main(["replay-check", FIXTURE, "--actors", "tests.upgrading.agents:ResearcherV2"])
    out = capsys.readouterr().out
    assert ok == 0 and "replayed 1 actor(s), 2 step(s): ok" in out
    bad = main(["replay-check", FIXTURE, "--actors", "tests.upgrading.agents:ResearcherUngated"])
    out = capsys.readouterr().out
    assert bad == 1
    assert "DIVERGED r1 (upgrade.researcher) step seq 1, effect #1" in out
    assert 'got upgrade.lookup("tides")' in out
    main(
        ["replay-check", FIXTURE, "--json", "--actors", "tests.upgrading.agents:ResearcherUngated"]
    )
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines[0]["type"] == "divergence" and lines[0]["step_seq"] == 1
    assert lines[-1] == {"type": "summary", "actors": 1, "steps": 0, "ok": False}


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ("nocolon", "is not module:Class"),
        ("tests.upgrading.nosuch:X", "cannot import 'tests.upgrading.nosuch'"),
        ("tests.upgrading.agents:Nope", "has no 'Nope'"),
        ("tests.upgrading.agents:Question", "is not an actorlog Actor class"),
    ],
)
def test_replay_check_names_a_bad_class_argument(
    capsys: pytest.CaptureFixture[str], spec: str, error: str
) -> None:
    assert main(["replay-check", FIXTURE, "--actors", spec]) == 2
    assert error in capsys.readouterr().err


def test_replay_check_names_a_missing_source(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["replay-check", "/nonexistent/x.jsonl", "--actors", "tests.upgrading.agents:ResearcherV2"]
    )
    assert code == 2
    assert "no such store or export file: /nonexistent/x.jsonl" in capsys.readouterr().err


# -- after a NonDeterminismError ------------------------------------------------------------


async def test_quarantined_for_non_determinism_then_restarted_with_the_fixed_code(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = str(tmp_path / "q.db")
    await record_v1(db, "tides")
    caplog.set_level(logging.INFO, logger="actorlog")
    async with ActorSystem(SqliteStore(db), actors=[ResearcherUngated]) as system:
        with pytest.raises(ActorQuarantinedError) as info:
            await system.spawn(ResearcherUngated, "r1")
        text = str(info.value)
        assert "ctx.version()/ctx.patched()" in text and "docs/upgrading.md" in text
        assert "system.restart('r1')" in text and "actorlog restart STORE r1" in text
        assert system.status("r1") == "quarantined"
        errors = [r for r in caplog.records if r.name == "actorlog.quarantine"]
        assert errors and errors[0].levelno == logging.ERROR
        assert "r1" in errors[0].getMessage() and "NonDeterminismError" in errors[0].getMessage()
        # restarting the same broken code quarantines it again, and says so
        with pytest.raises(ActorQuarantinedError):
            await system.restart("r1", reason="try again")
        # the fixed code, registered in the running system, then a restart
        system.register(ResearcherV2)
        ref = await system.restart("r1", by="ops", reason="gated the lookup")
        assert system.status("r1") == "idle"
        assert await ref.ask(Question("tides"), message_id="tides") == "found tides"
        with pytest.raises(ActorNotFoundError, match="is not quarantined in this system"):
            await system.restart("r1")
    async with ops.opened("sqlite:///" + db) as store:
        events = [(e.kind, e.detail) for e in (await ops.history(store, "r1")).events]
    restarted = [d for k, d in events if k == "restarted"]
    assert restarted[-1]["by"] == "ops" and restarted[-1]["reason"] == "gated the lookup"
    assert (
        "NonDeterminismError" in restarted[-1]["error"]
        or "non-deterministic" in restarted[-1]["error"]
    )


async def test_restart_command_clears_the_quarantine_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "c.db")
    await record_v1(db, "tides")
    async with ActorSystem(SqliteStore(db), actors=[ResearcherUngated]) as system:
        with pytest.raises(ActorQuarantinedError):
            await system.spawn(ResearcherUngated, "r1")
    async with ops.opened("sqlite:///" + db) as store:
        assert (await ops.actor_status(store, "r1")).status == "quarantined"
    args = ["restart", db, "r1", "--reason", "gated", "--by", "ops"]
    assert await anyio.to_thread.run_sync(main, args) == 0
    out = capsys.readouterr().out
    assert "recorded the restart of r1" in out and "NonDeterminismError" in out
    async with ops.opened("sqlite:///" + db) as store:
        assert (await ops.actor_status(store, "r1")).status == "idle"
        kinds = [e.kind for e in (await ops.history(store, "r1")).events]
    assert kinds[-1] == "restarted"
    assert await anyio.to_thread.run_sync(main, ["restart", db, "r1"]) == 2
    assert "actor 'r1' is not quarantined (idle): nothing to restart" in capsys.readouterr().err
    # the next runtime recovers it with the code it runs
    async with ActorSystem(SqliteStore(db), actors=[ResearcherV2]) as system:
        ref = await system.spawn(ResearcherV2, "r1")
        assert await ref.ask(Question("tides"), message_id="tides") == "found tides"


async def test_restart_of_an_actor_whose_class_was_not_registered(tmp_path: Path) -> None:
    """Quarantined on start (unfinished work, class not given): restart names the missing
    class, then, with the class registered, recovers and finishes the step."""
    db = str(tmp_path / "u.db")
    HANG_ONCE.add("comets")
    async with ActorSystem(SqliteStore(db), actors=[ResearcherV1], shutdown_grace=0.1) as system:
        ref = await system.spawn(ResearcherV1, "r1")
        await ref.send(Question("comets"), message_id="comets")
        with anyio.fail_after(5):
            while "search:comets" not in CALLS:
                await anyio.sleep(0.01)
    async with ActorSystem(SqliteStore(db), actors=[]) as system:
        assert system.status("r1") == "quarantined"
        with pytest.raises(ActorNotFoundError, match=r"its class 'upgrade\.researcher' is not"):
            await system.restart("r1")
        system.register(ResearcherV2)
        ref2 = await system.restart("r1", reason="class deployed")
        with anyio.fail_after(5):
            got = await ref2.ask(Question("comets"), message_id="comets")
        assert got == "found comets + details of comets"


def test_history_shows_the_restart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "h.db")

    async def setup() -> None:
        await record_v1(db, "tides")
        async with ActorSystem(SqliteStore(db), actors=[ResearcherUngated]) as system:
            with pytest.raises(ActorQuarantinedError):
                await system.spawn(ResearcherUngated, "r1")

    anyio.run(setup)
    assert main(["restart", db, "r1", "--reason", "gated"]) == 0
    capsys.readouterr()
    assert main(["history", db, "r1"]) == 0
    out = capsys.readouterr().out
    assert "restarted" in out
    assert main(["history", db, "r1", "--json"]) == 0
    assert '"restarted"' in capsys.readouterr().out
