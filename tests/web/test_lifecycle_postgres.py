"""The console's cancel, terminate and delete live on PostgreSQL: ``job-1`` is owned by a
runtime in another process, blocked in a write tool; the console's write reaches it through
the store's inbox. Needs a server (``ACTORLOG_TEST_POSTGRES_URL``; skips without one, except
under CI, where it fails)."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest

from tests import _pg
from tests.web._client import TOKEN, console, csrf_of, events, sign_in, status
from tests.web._owner import owning


@pytest.fixture
def pg_schema(pg_url: str) -> Iterator[str]:
    schema = _pg.new_schema("web_life")
    yield schema
    anyio.run(_pg.drop_schemas, pg_url, schema, backend="asyncio")


def test_cancel_from_the_console_reaches_the_owner(pg_url: str, pg_schema: str) -> None:
    url = _pg.schema_url(pg_url, pg_schema)
    with (
        owning(pg_url, pg_schema) as owner,
        console(url, allow_writes=True, token=TOKEN) as (
            client,
            _,
        ),
    ):
        sign_in(client)
        overview = client.get("/").text
        # its write call is in flight: the log cannot tell that from a crash, so in doubt
        assert 'data-actor="job-1" data-status="in_doubt"' in overview and "w1" in overview
        page = client.get("/actor", params={"id": "job-1"}).text
        assert 'id="cancel-form"' in page
        r = client.post(
            "/cancel",
            data={"id": "job-1", "csrf": csrf_of(page), "by": "ops", "reason": "too slow"},
            follow_redirects=False,
        )
        assert r.status_code == 303, r.text
        assert "cancels that step now" in client.get(r.headers["location"]).text
        assert owner.line() == "outcome StepCancelledError"  # the ask in the owner's process
        assert owner.line() == "after 2"  # the actor goes on
    kinds = [e.kind for e in events(url, "job-1")]
    assert "cancel_requested" in kinds and "cancelled" in kinds
    assert status(url, "job-1").status == "idle"


def test_terminate_from_the_console_reaches_the_owner_then_delete(
    pg_url: str, pg_schema: str
) -> None:
    url = _pg.schema_url(pg_url, pg_schema)
    with (
        owning(pg_url, pg_schema) as owner,
        console(url, allow_writes=True, token=TOKEN) as (
            client,
            _,
        ),
    ):
        sign_in(client)
        page = client.get("/delete", params={"id": "job-1"}).text
        assert 'Runtime <span class="mono">w1</span> runs it now' in page
        csrf = csrf_of(page)
        running = client.post("/delete", data={"id": "job-1", "csrf": csrf, "confirm": "force"})
        assert running.status_code == 400 and "runs in runtime" in running.text
        r = client.post(
            "/terminate",
            data={"id": "job-1", "csrf": csrf, "by": "ops", "reason": "runaway"},
            follow_redirects=False,
        )
        assert r.status_code == 303, r.text
        assert owner.line() == "outcome StepCancelledError"
        assert owner.line() == "after ActorFinishedError"
        assert status(url, "job-1").status == "terminated"
        d = client.post(
            "/delete",
            data={"id": "job-1", "csrf": csrf, "confirm": "yes", "reason": "cleanup"},
            follow_redirects=False,
        )
        assert d.status_code == 303, d.text
        listed = client.get("/deleted").text
    assert '<tr data-actor="job-1"' in listed and "cleanup" in listed
    assert 'class="badge b-terminated">terminated<' in listed
