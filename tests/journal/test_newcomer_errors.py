"""The errors a newcomer meets first say what to do (issue 15): bad actor ids, store URLs,
an actor instance where a class belongs, an unknown message type."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from actorlog import Actor, ActorSystem, ConfigurationError, Context, StoreURLError
from actorlog.stores import MemoryStore, open_store

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@attrs.define
class Empty:
    pass


class Agent(Actor[Empty]):
    async def receive(self, ctx: Context, msg: Any) -> None:
        pass


@pytest.mark.parametrize(
    ("actor_id", "fix"),
    [
        (42, 'pass f"run-{n}"'),
        ("", "a stable name such as 'run-42'"),
        ("a\nb", "use printable text"),
        ("x" * 201, "hashlib.sha256(key).hexdigest()"),
    ],
    ids=["int", "empty", "control", "long"],
)
async def test_a_bad_actor_id_says_what_an_id_is(actor_id: Any, fix: str) -> None:
    async with ActorSystem(MemoryStore(), actors=[Agent]) as system:
        with pytest.raises(ConfigurationError) as err:
            await system.spawn(Agent, actor_id)
        assert await system.store.list_actors() == []  # nothing was written
    assert fix in str(err.value)


@pytest.mark.parametrize(
    ("url", "fix"),
    [
        ("agents.db", "no scheme (for a SQLite file: sqlite:///agents.db)"),
        ("sqlite://agents.db", "did you mean sqlite:///agents.db?"),
        ("mysql://db/agents", "unknown scheme 'mysql'"),
    ],
)
def test_a_bad_store_url_says_the_url_that_works(url: str, fix: str) -> None:
    with pytest.raises(StoreURLError) as err:
        open_store(url)
    assert fix in str(err.value)
    assert "expected sqlite:///relative.db" in str(err.value)


def test_an_actor_instance_where_the_class_belongs_says_so() -> None:
    with pytest.raises(ConfigurationError, match=r"pass the class itself \(Agent\)"):
        ActorSystem(MemoryStore(), actors=[Agent()])  # type: ignore[list-item]  # on purpose
    with pytest.raises(ConfigurationError, match=r"class Researcher\(Actor\[StateClass\]\)"):
        ActorSystem(MemoryStore(), actors=[Empty])  # type: ignore[list-item]  # on purpose


async def test_an_unknown_message_type_names_the_three_fixes() -> None:
    async with ActorSystem(MemoryStore(), actors=[Agent]) as system:
        with pytest.raises(ConfigurationError) as err:
            system.registry.decode_message("gone.module.Ask", {})
    text = str(err.value)
    assert text.startswith("unknown message type 'gone.module.Ask'")  # the step code matches it
    assert "ActorSystem(messages=[...])" in text and "annotate receive()" in text
    assert '@actorlog.message(aliases=["gone.module.Ask"])' in text
