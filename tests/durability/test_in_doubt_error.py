"""Waits that speak (issue 15): an ``ask`` whose step escalates to an operator gets
``InDoubtError`` at once; the message stays logged, is handled after the decision, and a
later ask with its ``message_id`` gets the reply. Also: actorlog's log lines (quiet by
default) and ``last_recovery``'s ``RecoveryReport``."""

from __future__ import annotations

import logging

import anyio
import pytest
from actorlog import ActorSystem, InDoubtError, RecoveryReport
from actorlog._tracing.logs import shown_store

from tests.conftest import StoreFactory

from .._keys import Key
from ..runtime.agents import CALLS, Ask, Blocker

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _reset_calls() -> None:
    CALLS.reset()


async def crash_mid_tool(make_store: StoreFactory, tool_name: str, question: str) -> None:
    """A Blocker step hangs inside ``tool_name``; the system stops without grace."""
    CALLS.hang = {tool_name}
    async with ActorSystem(make_store(), actors=[Blocker], shutdown_grace=0) as system:
        ref = await system.spawn(Blocker, "b")
        await ref.send(Ask(question), message_id="m1")
        with anyio.fail_after(5):
            await CALLS.started.wait()
    CALLS.hang = set()


async def test_an_ask_of_an_escalated_step_gets_in_doubt_error_then_the_reply(
    make_store: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    await crash_mid_tool(make_store, "send_email", "email:1")
    caplog.set_level(logging.INFO, logger="actorlog")
    async with ActorSystem(make_store(), actors=[Blocker]) as system:
        ref = system.ref(Blocker, "b")
        with anyio.fail_after(5), pytest.raises(InDoubtError) as info:
            await ref.ask(Ask("email:1"), message_id="m1")  # waits no longer than the escalation
        err = info.value
        (seq,) = system.in_doubt("b")
        assert (err.actor_id, err.intent_seq, err.step_seq) == ("b", seq, 1)
        assert err.tool.endswith("send_email") and err.idempotency_key == Key("b", 1, 1)
        text = str(err)
        assert f"system.resolve('b', {seq}, result=... | retry=True | fail='why')" in text
        assert f"actorlog resolve {shown_store(system.store)} b {seq} --result JSON" in text
        assert "the message stays logged and is handled after the decision" in text
        # asked again while it still waits: the same answer, at once
        with anyio.fail_after(5), pytest.raises(InDoubtError):
            await ref.ask(Ask("email:1"), message_id="m1")
        assert system.status("b") == "in_doubt"
        await system.resolve("b", seq, result="sent by hand")
        with anyio.fail_after(5):
            assert await ref.ask(Ask("email:1"), message_id="m1") == "sent by hand"
        rec = system.last_recovery("b")
    assert CALLS.count("send_email") == 1
    warned = [r for r in caplog.records if r.name == "actorlog.in_doubt"]
    assert len(warned) == 1 and warned[0].levelno == logging.WARNING
    assert "waits for an operator" in warned[0].getMessage()
    recovered = [r for r in caplog.records if r.name == "actorlog.recovery"]
    assert recovered and recovered[0].levelno == logging.INFO
    assert "recovered actor b" in recovered[0].getMessage()
    assert "1 tool calls in doubt" in recovered[0].getMessage()
    # the recovery report: typed fields, still readable by key
    assert isinstance(rec, RecoveryReport)
    assert rec.in_doubt == 1 and rec.pending_messages == 1 and rec.steps_replayed == 0
    assert rec["entries_read"] == rec.entries_read > 0
    assert rec.as_dict()["snapshot_seq"] == rec.snapshot_seq == 0
    assert rec.get("nope", 7) == 7
    with pytest.raises(KeyError):
        rec["nope"]


async def test_a_new_message_behind_an_escalated_step_waits_for_it(
    make_store: StoreFactory,
) -> None:
    """Only the asks of the escalated step's message get InDoubtError; a message queued
    behind it is answered once the step completes."""
    await crash_mid_tool(make_store, "send_email", "email:1")
    async with ActorSystem(make_store(), actors=[Blocker]) as system:
        ref = await system.spawn(Blocker, "b")
        with anyio.fail_after(5):
            (seq,) = await system.wait_in_doubt("b")
        got: list[str] = []

        async def ask_next() -> None:
            got.append(await ref.ask(Ask("plain"), message_id="m2"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask_next)
            await anyio.sleep(0.05)
            assert got == []  # still behind the escalated step
            await system.resolve("b", seq, fail="bounced")
        assert got == ["none"]


def test_actorlog_is_quiet_unless_logging_is_configured() -> None:
    handlers = logging.getLogger("actorlog").handlers
    assert any(isinstance(h, logging.NullHandler) for h in handlers)


def test_a_store_url_is_shown_without_its_password() -> None:
    class Pg:
        url = "postgresql://app:s3cret@db:5432/agents"

    assert shown_store(Pg()) == "postgresql://app:***@db:5432/agents"
    assert "s3cret" not in shown_store(Pg())
