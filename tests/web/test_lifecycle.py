"""The console's lifecycle writes over a real SQLite store (Starlette's TestClient): cancel,
terminate and delete are refused read-only, without the token or the CSRF token, and while a
runtime holds the file (409, its lock message); with them they are ``ops.lifecycle``'s writes
(the same events and audit row as ``actorlog cancel|terminate|delete``). Also the overview's
statuses and the Deleted page."""

from __future__ import annotations

import html
import re
from pathlib import Path

import anyio
import pytest
from actorlog import ops
from actorlog.ops.listing import STATUSES
from actorlog.stores import SqliteStore

from tests.web._agents import HOSTILE_IDS
from tests.web._client import TOKEN, console, csrf_of, events, sign_in, status

WRITES = {
    "cancel": {"reason": "too slow"},
    "terminate": {"reason": "runaway"},
    "delete": {"confirm": "force", "reason": "cleanup"},
}


def _url(db: Path) -> str:
    return f"sqlite:///{db}"


def _deleted(url: str) -> list[ops.Deleted]:
    async def read() -> list[ops.Deleted]:
        async with ops.opened(url) as store:
            return await ops.deleted(store)

    return anyio.run(read, backend="asyncio")


def _untouched(url: str) -> None:
    """incident-7 as the crash left it: in doubt, no lifecycle event, not deleted."""
    a = status(url, "incident-7")
    assert a.status == "in_doubt"
    kinds = {e.kind for e in events(url, "incident-7")}
    assert not kinds & {"cancel_requested", "terminated"}
    assert _deleted(url) == []


@pytest.mark.parametrize("write", list(WRITES))
def test_a_read_only_console_refuses_it(write: str, crashed: Path) -> None:
    url = _url(crashed)
    with console(url) as (client, _):
        page = client.get("/actor", params={"id": "incident-7"}).text
        assert f'action="/{write}"' not in page and "actorlog cancel|terminate" in page
        r = client.post(
            f"/{write}",
            data={"id": "incident-7", **WRITES[write]},
            headers={"authorization": f"Bearer {TOKEN}"},
        )
    assert r.status_code == 403 and "read-only" in r.text
    _untouched(url)


@pytest.mark.parametrize("write", list(WRITES))
def test_it_needs_the_token_and_the_csrf_token_then_works(write: str, crashed: Path) -> None:
    url = _url(crashed)
    form = {"id": "incident-7", "by": "ana", **WRITES[write]}
    with console(url, allow_writes=True, token=TOKEN) as (client, _):
        assert client.post(f"/{write}", data=form).status_code == 403  # not signed in
        bearer = client.post(f"/{write}", data=form, headers={"authorization": "Bearer guess"})
        assert bearer.status_code == 403
        sign_in(client)
        no_csrf = client.post(f"/{write}", data=form)
        assert no_csrf.status_code == 403 and "CSRF" in no_csrf.text
        page = client.get("/actor", params={"id": "incident-7"}).text
        if write == "delete":  # the link leads to the page naming what goes, with the form
            assert 'href="/delete?id=incident-7"' in page
            page = client.get("/delete", params={"id": "incident-7"}).text
        assert f'action="/{write}"' in page
        csrf = csrf_of(page)
        cross = client.post(
            f"/{write}",
            data={**form, "csrf": csrf},
            headers={"origin": "http://evil.example", "sec-fetch-site": "cross-site"},
        )
        assert cross.status_code == 403 and "another origin" in cross.text
        _untouched(url)
        ok = client.post(f"/{write}", data={**form, "csrf": csrf}, follow_redirects=False)
        assert ok.status_code == 303, ok.text
        after = client.get(ok.headers["location"]).text
    if write == "cancel":
        assert "cancel of the running step requested" in after
        [ev] = [e for e in events(url, "incident-7") if e.kind == "cancel_requested"]
        assert (ev.detail["by"], ev.detail["reason"]) == ("ana", "too slow")
    elif write == "terminate":
        assert 'id="status">terminated<' in after and "takes no more steps" in after
        assert status(url, "incident-7").status == "terminated"
        [ev] = [e for e in events(url, "incident-7") if e.kind == "terminated"]
        assert (ev.detail["by"], ev.detail["reason"]) == ("ana", "runaway")
    else:
        assert "deleted incident-7" in after and "unfinished work is deleted" in after
        assert re.findall(r'<tr data-actor="([^"]*)"', after) == ["incident-7"]
        [d] = _deleted(url)
        assert (d.actor_id, d.by, d.reason, d.forced, d.ended) == (
            "incident-7",
            "ana",
            "cleanup",
            True,
            None,
        )


@pytest.mark.parametrize("write", list(WRITES))
def test_a_runtime_holding_the_sqlite_file_makes_it_a_409(write: str, crashed: Path) -> None:
    url = _url(crashed)
    holder = SqliteStore(crashed)  # a runtime's writable store: it takes the file's lock

    async def hold_and_post() -> tuple[int, str]:
        await holder.open()
        try:

            def post() -> tuple[int, str]:
                with console(url, allow_writes=True, token=TOKEN) as (client, _):
                    r = client.post(
                        f"/{write}",
                        data={"id": "incident-7", **WRITES[write]},
                        headers={"authorization": f"Bearer {TOKEN}"},
                    )
                    return r.status_code, r.text

            return await anyio.to_thread.run_sync(post)
        finally:
            await holder.close()

    code, text = anyio.run(hold_and_post, backend="asyncio")
    assert code == 409, text
    assert "in use by another writer" in text and f"can {write} only offline" in text
    _untouched(url)


def test_delete_asks_yes_for_an_ended_actor_and_force_otherwise(crashed: Path) -> None:
    url = _url(crashed)
    with console(url, allow_writes=True, token=TOKEN) as (client, _):
        sign_in(client)
        page = client.get("/delete", params={"id": "incident-7"}).text
        assert 'name="confirm" value="force"' in page and "unfinished work" in page
        assert "in doubt, never decided" in page  # what goes with it
        csrf = csrf_of(page)
        form = {"id": "incident-7", "csrf": csrf}
        for confirm in ("", "yes"):  # not enough for an actor that has not ended
            r = client.post("/delete", data={**form, "confirm": confirm})
            assert r.status_code == 409 and "refused, nothing deleted" in r.text
            assert "loses its unfinished work" in r.text
        _untouched(url)
        t = client.post("/terminate", data=form, follow_redirects=False)
        assert t.status_code == 303
        page = client.get("/delete", params={"id": "incident-7"}).text
        assert 'name="confirm" value="yes"' in page and "for good" in page
        m = re.search(r"<b>([\d,]+)</b> entr", page)
        assert m is not None and int(m.group(1)) == status(url, "incident-7").last_seq
        r = client.post("/delete", data={**form, "confirm": ""})
        assert r.status_code == 409 and "confirm that its log" in r.text
        assert status(url, "incident-7").status == "terminated"  # still there
        ok = client.post(
            "/delete", data={**form, "confirm": "yes", "reason": "done"}, follow_redirects=False
        )
        assert ok.status_code == 303
        gone = client.get("/actor", params={"id": "incident-7"})
        assert gone.status_code == 404 and "was deleted" in gone.text
        listed = client.get("/deleted").text
    [d] = _deleted(url)
    assert (d.ended, d.forced, d.reason) == ("terminated", False, "done")
    assert re.findall(r'<tr data-actor="([^"]*)"', listed) == ["incident-7"]
    assert "done" in listed and "terminated" in listed


def test_lifecycle_pages_escape_hostile_ids(hostile: Path) -> None:
    url = _url(hostile)
    victim = HOSTILE_IDS[0]
    with console(url, allow_writes=True, token=TOKEN) as (client, _):
        sign_in(client)
        actor = client.get("/actor", params={"id": victim}).text
        page = client.get("/delete", params={"id": victim})
        assert page.status_code == 200
        for text in (actor, page.text):
            assert "<script>alert" not in text
        r = client.post(
            "/delete",
            data={"id": victim, "confirm": "force", "csrf": csrf_of(page.text), "reason": "<b>x"},
        )
        assert r.status_code == 200, r.text  # followed to the Deleted page
    assert "<script>alert" not in r.text and "<b>x" not in r.text
    assert html.escape(victim) in r.text.replace("&#34;", "&quot;")
    assert [d.actor_id for d in _deleted(url)] == [victim]


def test_the_overview_offers_exactly_the_statuses_ops_reports(crashed: Path) -> None:
    """ops.reads derives these words (``failed`` is gone: ``quarantined`` or ``stopped``)."""
    assert set(STATUSES) == {
        "idle",
        "running",
        "in_doubt",
        "quarantined",
        "stopped",
        "finished",
        "terminated",
    }
    url = _url(crashed)
    with console(url, allow_writes=True, token=TOKEN) as (client, _):
        page = client.get("/").text
        offered = re.findall(r'<option value="([a-z_]+)"', page.split('name="class"')[0])
        assert offered == list(STATUSES)
        assert client.get("/", params={"status": "failed"}).status_code == 400
        r = client.post(
            "/terminate",
            data={"id": "incident-7"},
            headers={"authorization": f"Bearer {TOKEN}"},
            follow_redirects=False,
        )
        assert r.status_code == 303
        ended = client.get("/", params={"status": "terminated"}).text
        assert re.findall(r'data-actor="([^"]*)"', ended) == ["incident-7"]
        assert 'data-actor="' not in client.get("/", params={"status": "in_doubt"}).text
