"""The hot fix docs/upgrading.md describes, done for real (issue 24, item 14): the module is
edited and ``importlib.reload``-ed in the running process, the fixed class registered
(``system.register``) and the actor restarted (``system.restart``): messages decode into the
reloaded classes, the actor works in that runtime and every later one, and no tool runs again
for a step already recorded."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from actorlog import ActorQuarantinedError, ActorSystem
from actorlog.stores import SqliteStore

from .agents import CALLS

pytestmark = pytest.mark.anyio

SOURCE = """
from __future__ import annotations

import attrs
from actorlog import Actor, Context, message, tool

from tests.upgrading.agents import CALLS


@message(name="hotfix.question")
@attrs.frozen
class Question:
    q: str


@attrs.define
class Notes:
    answers: list[str] = attrs.Factory(list)


@tool(effect="read", name="hotfix.search")
async def search(q: str) -> str:
    CALLS.append(f"search:{q}")
    return f"found {q}"


@tool(effect="read", name="hotfix.lookup")
async def lookup(q: str) -> str:
    CALLS.append(f"lookup:{q}")
    return f"details of {q}"


class Researcher(Actor[Notes], name="hotfix.researcher"):
    async def receive(self, ctx: Context, msg: Question) -> str:
        found = await ctx.call(search, msg.q)
        BODY
        self.state.answers.append(found)
        return found
"""
V1 = "pass"
UNGATED = 'found += " + " + await ctx.call(lookup, msg.q)'
FIXED = 'if ctx.patched("add-lookup"):\n            found += " + " + await ctx.call(lookup, msg.q)'


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def module(tmp_path: Path) -> Iterator[tuple[Path, ModuleType]]:
    path = tmp_path / "hotfix_agents.py"
    path.write_text(SOURCE.replace("BODY", V1))
    sys.path.insert(0, str(tmp_path))
    CALLS.clear()
    try:
        yield path, importlib.import_module("hotfix_agents")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("hotfix_agents", None)
        CALLS.clear()


def edit(path: Path, body: str) -> ModuleType:
    path.write_text(SOURCE.replace("BODY", body))
    importlib.invalidate_caches()
    return importlib.reload(sys.modules["hotfix_agents"])


async def test_reload_register_restart_decodes_into_the_new_classes(
    tmp_path: Path, module: tuple[Path, ModuleType]
) -> None:
    path, mod = module
    db = str(tmp_path / "h.db")
    async with ActorSystem(SqliteStore(db), actors=[mod.Researcher]) as system:
        ref = await system.spawn(mod.Researcher, "r1")
        assert await ref.ask(mod.Question("tides")) == "found tides"
    mod = edit(path, UNGATED)  # the bad deploy: quarantined on replay
    async with ActorSystem(SqliteStore(db), actors=[mod.Researcher]) as system:
        with pytest.raises(ActorQuarantinedError):
            await system.spawn(mod.Researcher, "r1")
        mod = edit(path, FIXED)  # the hot fix, in this process
        system.register(mod.Researcher)
        ref = await system.restart("r1", reason="gated the lookup")
        assert await ref.ask(mod.Question("moons")) == "found moons + details of moons"
        assert system.status("r1") == "idle"
    assert CALLS == ["search:tides", "search:moons", "lookup:moons"]
    async with ActorSystem(SqliteStore(db), actors=[mod.Researcher]) as system:
        ref = await system.spawn(mod.Researcher, "r1")
        assert await ref.ask(mod.Question("comets")) == "found comets + details of comets"
        assert system.status("r1") == "idle"
    assert CALLS[3:] == ["search:comets", "lookup:comets"]


async def test_register_replaces_message_classes_in_a_running_system(
    tmp_path: Path, module: tuple[Path, ModuleType]
) -> None:
    """Without a quarantine: the reloaded class registered, an actor spawned after it takes
    the reloaded module's messages."""
    path, mod = module
    db = str(tmp_path / "r.db")
    async with ActorSystem(SqliteStore(db), actors=[mod.Researcher]) as system:
        ref = await system.spawn(mod.Researcher, "a")
        assert await ref.ask(mod.Question("x")) == "found x"
        mod = edit(path, FIXED)
        system.register(mod.Researcher)
        ref2 = await system.spawn(mod.Researcher, "b")
        assert await ref2.ask(mod.Question("y")) == "found y + details of y"
