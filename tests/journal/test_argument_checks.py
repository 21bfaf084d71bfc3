"""Bad arguments are refused at the call with a typed error whose message stays short
(issue 24 follow-ups NEW-1, NEW-3, NEW-7; the fuzz in tests/fuzz tries every parameter).

NEW-1: an error message showed the value with a plain ``repr``: a 2,000-level nested list
made the message itself fail (RecursionError). NEW-3: NUL and other control characters were
accepted in stable names (PostgreSQL text cannot hold NUL). NEW-7: options that were not
checked (``aliases=``, ``ops.verify(progress=)``, ``ops.list_actors_page`` filters).
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import attrs
import pytest
from actorlog import Actor, ActorlogError, ConfigurationError, Retry, message, ops, tool
from actorlog._journal.names import aliases
from actorlog.stores import MemoryStore, SqliteStore, open_store


def _deep(n: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(n):
        value = [value]
    return value


DEEP = _deep(2000)


async def _noop() -> None:
    return None


@attrs.define
class Book:
    pages: int = 0


@attrs.define
class Plain:
    x: int = 0


def _actor(**kw: Any) -> type:
    return types.new_class("Named", (Actor[Book],), kw, lambda ns: ns.update(__module__=__name__))


CALLS: dict[str, Callable[[Any], object]] = {
    "Retry(attempts=)": lambda v: Retry(attempts=v),
    "Retry(initial=)": lambda v: Retry(initial=v),
    "Retry(on=)": lambda v: Retry(on=v),
    "tool(effect=)": lambda v: tool(effect=v)(_noop),
    "tool(timeout=)": lambda v: tool(effect="read", timeout=v)(_noop),
    "tool(name=)": lambda v: tool(effect="read", name=v)(_noop),
    "message(cls)": lambda v: message(v),
    "message(name=)": lambda v: message(name=v)(Plain),
    "message(aliases=)": lambda v: message(aliases=v)(Plain),
    "Actor(name=)": lambda v: _actor(name=v),
    "Actor(aliases=)": lambda v: _actor(aliases=v),
    "SqliteStore(durability=)": lambda v: SqliteStore("x.db", durability=v),
    "SqliteStore(commit_on_loop=)": lambda v: SqliteStore("x.db", commit_on_loop=v),
    "open_store(url)": lambda v: open_store(v),
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_deeply_nested_value_is_refused_with_a_short_message(call: str) -> None:
    with pytest.raises(ActorlogError) as err:
        CALLS[call](DEEP)
    assert len(str(err.value)) < 600, str(err.value)
    assert "[[[" in str(err.value)  # the value is shown, bounded


@pytest.mark.parametrize("bad", ["a\x00b", "line\nbreak", "tab\there", "del\x7f", "c1\x85"])
@pytest.mark.parametrize("call", ["tool(name=)", "message(name=)", "Actor(name=)"])
def test_a_stable_name_with_control_characters_is_refused(call: str, bad: str) -> None:
    with pytest.raises(ConfigurationError, match="control characters"):
        CALLS[call](bad)


@pytest.mark.parametrize("call", ["message(aliases=)", "Actor(aliases=)"])
def test_an_alias_with_a_nul_is_refused(call: str) -> None:
    with pytest.raises(ConfigurationError, match=r"an alias .* contains control characters"):
        CALLS[call](["old\x00name"])


@pytest.mark.parametrize("aliases", [3, 2.5, object(), Plain])
@pytest.mark.parametrize("call", ["message(aliases=)", "Actor(aliases=)"])
def test_aliases_must_be_a_list_of_names(call: str, aliases: object) -> None:
    with pytest.raises(ConfigurationError, match="aliases must be a list of names"):
        CALLS[call](aliases)


def test_names_that_were_fine_stay_fine() -> None:
    t = tool(effect="read", name="lookup v2 (ünïcode)")(_noop)
    assert t.name == "lookup v2 (ünïcode)"
    named = _actor(name="named-actor-checks", aliases=("old.Named", "older.Named"))
    assert aliases(named) == ("old.Named", "older.Named")


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"search": "a\x00b"}, "search .* contains a NUL"),
        ({"actor_type": 3}, "actor_type must be a str"),
        ({"status": DEEP}, "status must be a str"),
        ({"sort": ["id"]}, "sort must be one of"),
        ({"sort": DEEP}, "sort must be one of"),
    ],
)
async def test_list_actors_page_checks_its_filters(kwargs: dict[str, Any], match: str) -> None:
    store = MemoryStore()
    await store.open()
    try:
        with pytest.raises(ConfigurationError, match=match):
            await ops.list_actors_page(store, **kwargs)
        page = await ops.list_actors_page(store, descending=[1])  # type: ignore[arg-type]  # a flag: any value
        assert page.actors == []
    finally:
        await store.close()


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_verify_refuses_a_progress_that_is_not_callable() -> None:
    store = MemoryStore()
    await store.open()
    try:
        for bad in (3, Plain, lambda aid: None):
            with pytest.raises(ConfigurationError, match="progress must be a callable"):
                await ops.verify(store, progress=bad)  # type: ignore[arg-type]  # on purpose
        seen: list[object] = []
        await ops.verify(store, progress=lambda *a: seen.append(a))  # any callable that fits
    finally:
        await store.close()
