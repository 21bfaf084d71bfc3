"""The console over real SQLite stores, through Starlette's TestClient: every page, escaping of
hostile log values, read-only mode, the token and CSRF checks, and that its writes are the
operator API's (same rules, same audit record as ``actorlog resolve``)."""

from __future__ import annotations

import html
import re
from pathlib import Path

import anyio
import pytest
from actorlog import ops
from actorlog.stores import SqliteStore

from tests.cli._support import flip_byte
from tests.web._agents import HOSTILE_IDS, HOSTILE_TEXT
from tests.web._client import TOKEN, console, csrf_of, events, sign_in, status


def _url(db: Path) -> str:
    return f"sqlite:///{db}"


_RAW_MARKUP = ("<script>alert", "<img src=x", "<b>bold</b>", "<echo>", "<i>m")


def _norm(page: str) -> str:
    """Jinja2 writes quotes as numeric entities; html.escape as named ones."""
    return page.replace("&#34;", "&quot;").replace("&#39;", "&#x27;")


def _text_of(page: str) -> str:
    """The page without its attribute values (ids travel raw in form fields and links)."""
    return re.sub(r'="[^"]*"', '=""', page)


def _assert_no_raw_markup(page: str) -> None:
    for raw in _RAW_MARKUP:
        assert raw not in page, f"unescaped {raw!r} in the page"


def test_every_page_escapes_hostile_ids_payloads_and_errors(hostile: Path) -> None:
    with console(_url(hostile)) as (client, _):
        overview = client.get("/")
        assert overview.status_code == 200
        _assert_no_raw_markup(overview.text)
        assert html.escape('<script>alert("id")</script>') in _norm(overview.text)
        # the bidi override is shown as an escape, never applied to the page
        assert "\u202e" not in _text_of(overview.text) and "\\u202e" in overview.text
        for actor_id in HOSTILE_IDS:
            page = client.get("/actor", params={"id": actor_id})
            assert page.status_code == 200, actor_id
            _assert_no_raw_markup(page.text)
            assert "\u202e" not in _text_of(page.text)
            assert html.escape("ValueError") in page.text  # the hostile handler error shown
            assert html.escape('<script>alert("xss")</script>') in _norm(page.text)
            entry = client.get("/entry", params={"id": actor_id, "seq": 1})
            assert entry.status_code == 200
            _assert_no_raw_markup(entry.text)
            assert "L" * 5000 in entry.text  # a very long value is there in full
        verify = client.get("/verify", params={"run": "1"})
        assert verify.status_code == 200 and "no damage found" in verify.text
        _assert_no_raw_markup(client.get("/queue").text)
        fork = client.get("/fork", params={"id": HOSTILE_IDS[0], "at": 1})
        assert fork.status_code == 200
        _assert_no_raw_markup(fork.text)


def test_pages_forbid_inline_scripts_and_framing(hostile: Path) -> None:
    with console(_url(hostile)) as (client, _):
        r = client.get("/")
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "'unsafe-inline'" not in csp
    assert r.headers["x-frame-options"] == "DENY"


def test_an_unknown_actor_is_a_404_page_naming_it(hostile: Path) -> None:
    with console(_url(hostile)) as (client, _):
        r = client.get("/actor", params={"id": "<nobody>"})
    assert r.status_code == 404
    assert "&lt;nobody&gt;" in r.text and "<nobody>" not in r.text


def test_the_overview_filters_by_status_class_and_id(hostile: Path) -> None:
    with console(_url(hostile)) as (client, _):
        doubt = client.get("/", params={"status": "in_doubt"}).text
        assert re.findall(r'data-actor="([^"]*)"', doubt) == ["bill-1"]
        biller = client.get("/", params={"class": "tests.cli._agents.Biller"}).text
        assert set(re.findall(r'data-actor="([^"]*)"', biller)) == {"bill-1"}
        found = client.get("/", params={"q": "LONG-X"}).text  # case-insensitive
        assert [html.unescape(a) for a in re.findall(r'data-actor="([^"]*)"', found)] == [
            HOSTILE_IDS[3]
        ]
        counts = client.get("/").text
        assert re.search(r"<b>5</b> actors in the store", counts)
        bad = client.get("/", params={"sort": "<x>"})
        assert bad.status_code == 400 and "&lt;x&gt;" in bad.text


def _many(db: Path, n: int) -> None:
    async def make() -> None:
        store = SqliteStore(db)
        await store.open()
        try:
            for i in range(n):
                await store.register_actor(f"a-{i:04d}", "bulk.Actor")
        finally:
            await store.close()

    anyio.run(make, backend="asyncio")


def test_the_overview_pages_through_many_actors(tmp_path: Path) -> None:
    db = tmp_path / "many.db"
    _many(db, 120)
    with console(_url(db), page_size=50) as (client, _):
        first = client.get("/").text
        ids = re.findall(r'data-actor="([^"]*)"', first)
        assert ids == [f"a-{i:04d}" for i in range(50)]
        assert "1\u201350 of 120" in first  # an en dash
        nxt = re.search(r'id="next" href="([^"]*)"', first)
        assert nxt is not None
        second = client.get(html.unescape(nxt.group(1))).text
        assert re.findall(r'data-actor="([^"]*)"', second)[0] == "a-0050"
        last = client.get("/", params={"offset": 100}).text
        assert re.findall(r'data-actor="([^"]*)"', last) == [f"a-{i:04d}" for i in range(100, 120)]
        assert 'id="next"' not in last
        desc = client.get("/", params={"sort": "id", "desc": "1"}).text
        assert re.findall(r'data-actor="([^"]*)"', desc)[0] == "a-0119"


def test_list_actors_page_reads_statuses_only_for_the_page(tmp_path: Path) -> None:
    """The operator API behind the overview: a page's statuses, and the row-level counts."""
    db = tmp_path / "many.db"
    _many(db, 30)

    async def read() -> ops.ActorPage:
        async with ops.opened(_url(db)) as store:
            return await ops.list_actors_page(store, limit=10, offset=25, sort="id")

    p = anyio.run(read, backend="asyncio")
    assert [a.actor_id for a in p.actors] == [f"a-{i:04d}" for i in range(25, 30)]
    assert (p.total, p.next_offset, p.actors_in_store) == (30, None, 30)
    assert p.classes == {"bulk.Actor": 30} and p.status_counts == {}
    assert all(a.status == "idle" for a in p.actors)


def test_read_only_console_refuses_writes_and_writes_nothing(crashed: Path) -> None:
    url = _url(crashed)
    with console(url) as (client, _):
        page = client.get("/actor", params={"id": "incident-7"}).text
        assert 'action="/resolve"' not in page  # no form: the CLI command instead
        assert "actorlog resolve" in page
        r = client.post(
            "/resolve",
            data={"id": "incident-7", "intent_seq": "19", "action": "retry"},
            headers={"authorization": f"Bearer {TOKEN}"},
        )
    assert r.status_code == 403 and "read-only" in r.text
    assert status(url, "incident-7").status == "in_doubt"


def test_writes_need_the_token_and_the_forms_csrf_token(crashed: Path) -> None:
    url = _url(crashed)
    form = {"id": "incident-7", "intent_seq": "19", "action": "result", "value": '"PAGE-9"'}
    with console(url, allow_writes=True, token=TOKEN) as (client, _):
        anonymous = client.post("/resolve", data=form)
        assert anonymous.status_code == 403 and "sign in" in anonymous.text
        wrong = client.get("/login", params={"token": "guess"}, follow_redirects=False)
        assert wrong.status_code == 403 and "actorlog_session" not in client.cookies
        bearer = client.post("/resolve", data=form, headers={"authorization": "Bearer guess"})
        assert bearer.status_code == 403
        sign_in(client)
        no_csrf = client.post("/resolve", data=form)
        assert no_csrf.status_code == 403 and "CSRF" in no_csrf.text
        bad_csrf = client.post("/resolve", data={**form, "csrf": "0" * 64})
        assert bad_csrf.status_code == 403
        csrf = csrf_of(client.get("/actor", params={"id": "incident-7"}).text)
        cross = client.post(
            "/resolve",
            data={**form, "csrf": csrf},
            headers={"origin": "http://evil.example", "sec-fetch-site": "cross-site"},
        )
        assert cross.status_code == 403 and "another origin" in cross.text
        assert status(url, "incident-7").status == "in_doubt"  # nothing written so far
        ok = client.post(
            "/resolve",
            data={**form, "csrf": csrf, "reason": "seen in <PagerDuty>", "by": "ana"},
            headers={"origin": "http://127.0.0.1"},
            follow_redirects=False,
        )
        assert ok.status_code == 303, ok.text
        after = client.get(ok.headers["location"]).text
        assert "recorded decision seq 20 (result) on intent seq 19 by ana" in after
        again = client.post("/resolve", data={**form, "csrf": csrf})
        assert again.status_code == 409 and "AlreadyDecidedError" in again.text
    a = status(url, "incident-7")
    assert a.status == "running" and a.in_doubt == []  # settled; a runtime finishes it
    resolved = [e for e in events(url, "incident-7") if e.kind == "resolved"]
    assert len(resolved) == 1  # the same audit record as actorlog resolve
    assert resolved[0].detail["by"] == "ana"
    assert resolved[0].detail["reason"] == "seen in <PagerDuty>"
    assert resolved[0].detail["action"] == "result" and resolved[0].detail["offline"] is True


def test_a_script_can_write_with_the_bearer_token(crashed: Path) -> None:
    url = _url(crashed)
    with console(url, allow_writes=True, token=TOKEN) as (client, _):
        r = client.post(
            "/resolve",
            data={"id": "incident-7", "intent_seq": "19", "action": "fail", "message": "no"},
            headers={"authorization": f"Bearer {TOKEN}"},
            follow_redirects=False,
        )
    assert r.status_code == 303
    assert status(url, "incident-7").in_doubt == []


def test_a_write_while_a_runtime_holds_the_sqlite_file_is_refused_clearly(crashed: Path) -> None:
    url = _url(crashed)
    holder = SqliteStore(crashed)  # a runtime's writable store: it takes the file's lock

    async def hold_and_post() -> tuple[int, str, str]:
        await holder.open()
        try:
            # the console reads meanwhile (a reader is welcome); its write is refused
            def post() -> tuple[int, str, str]:
                with console(url, allow_writes=True, token=TOKEN) as (client, _):
                    sign_in(client)
                    page = client.get("/actor", params={"id": "incident-7"}).text
                    r = client.post(
                        "/resolve",
                        data={
                            "id": "incident-7",
                            "intent_seq": "19",
                            "action": "retry",
                            "csrf": csrf_of(page),
                        },
                    )
                    return r.status_code, r.text, page

            return await anyio.to_thread.run_sync(post)
        finally:
            await holder.close()

    code, text, page = anyio.run(hold_and_post, backend="asyncio")
    assert "incident-7" in page
    assert code == 409 and "in use by another writer" in text
    assert status(url, "incident-7").status == "in_doubt"


def test_fork_lists_the_effects_before_it_forks(crashed: Path) -> None:
    url = _url(crashed)
    with console(url, allow_writes=True, token=TOKEN) as (client, _):
        sign_in(client)
        page = client.get("/fork", params={"id": "incident-7", "at": 5})
        assert page.status_code == 200
        shown = len(re.findall(r'class="effect-row"', page.text))
        assert shown >= 2 and "send_email" in page.text and "page_oncall" in page.text
        form = {
            "id": "incident-7",
            "at": "5",
            "new_id": "incident-7b",
            "csrf": csrf_of(page.text),
        }
        stale = client.post("/fork", data={**form, "seen": "0"})
        assert stale.status_code == 400 and "review them again" in stale.text
        ok = client.post("/fork", data={**form, "seen": str(shown)}, follow_redirects=False)
        assert ok.status_code == 303, ok.text
    fork = status(url, "incident-7b")
    assert fork.last_seq == 5
    assert any(e.kind == "forked" for e in events(url, "incident-7b"))


def test_verify_names_the_damaged_entry(crashed: Path) -> None:
    flip_byte(crashed, 19)  # the in-doubt intent, after the last snapshot
    with console(_url(crashed)) as (client, _):
        r = client.get("/verify", params={"run": "1"})
        assert "DAMAGE: 1 problem(s)" in r.text
        assert 'href="/entry?id=incident-7&amp;seq=19"' in r.text
        entry = client.get("/entry", params={"id": "incident-7", "seq": 19}).text
        assert "damaged" in entry
        overview = client.get("/", params={"status": "quarantined"}).text
        assert re.findall(r'data-actor="([^"]*)"', overview) == ["incident-7"]


def test_the_in_doubt_queue_lists_every_waiting_call_oldest_first(hostile: Path) -> None:
    with console(_url(hostile)) as (client, _):
        r = client.get("/queue").text
    rows = re.findall(r'data-actor="([^"]*)" data-intent-seq="(\d+)"', r)
    assert rows == [("bill-1", "6")]
    assert "charge_card" in r and re.search(r"bill-1:[0-9a-f]{16}:5:0", r)


def test_the_hostile_text_is_a_real_value_in_the_store(hostile: Path) -> None:
    """The escaping tests above see the hostile text: it is what the log holds."""

    async def read() -> ops.History:
        async with ops.opened(_url(hostile)) as store:
            return await ops.history(store, HOSTILE_IDS[0])

    h = anyio.run(read, backend="asyncio")
    assert h.steps[0].body == {"text": HOSTILE_TEXT}
    assert h.steps[1].error is not None and h.steps[1].error["message"] == HOSTILE_TEXT


@pytest.mark.parametrize("bad", ["ftp://x/{trace_id}", "http://x/no-placeholder"])
def test_a_trace_url_must_be_http_with_the_trace_id(bad: str, crashed: Path) -> None:
    from actorlog import ConfigurationError
    from actorlog.web import ServeConfig

    with pytest.raises(ConfigurationError):
        ServeConfig(store_url=_url(crashed), trace_url=bad)
