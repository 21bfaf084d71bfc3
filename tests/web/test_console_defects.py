"""Console defects of issue 24 (items 19-22) and issue 29 (item 6): concurrent writes, hostile
form and query values, the Host a console serves, one in-doubt derivation with the CLI, damage
and a missing store, and pretty JSON with real line breaks."""

from __future__ import annotations

import html
import json
import os
import re
import threading
from pathlib import Path
from typing import Any

import anyio
import attrs
import httpx
from actorlog import Actor, ActorSystem, Context, tool
from actorlog.stores import SqliteStore

from tests.cli._support import cli, flip_byte
from tests.web._client import TOKEN, console, csrf_of, events, sign_in, status
from tests.web._serve import serve


def _url(db: Path) -> str:
    return f"sqlite:///{db}"


# -- 19: writes serialized inside the console process ---------------------------------------


def test_concurrent_resolves_of_one_intent_give_one_success_and_already_decided(
    crashed: Path,
) -> None:
    """8 operators resolve the same intent at once, no runtime on the file: one decision is
    recorded, the 7 others are told it already has one (409), never the console's own lock."""
    with serve(crashed, "--allow-writes", "--token", TOKEN) as s:
        answers: list[httpx.Response] = []
        lock = threading.Lock()
        start = threading.Barrier(8)

        def post(n: int) -> None:
            start.wait()
            r = httpx.post(
                s.base + "/resolve",
                data={
                    "id": "incident-7",
                    "intent_seq": "19",
                    "action": "result",
                    "value": f'"PAGE-{n}"',
                },
                headers={"authorization": f"Bearer {TOKEN}"},
                timeout=60,
            )
            with lock:
                answers.append(r)

        threads = [threading.Thread(target=post, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        pid = str(s.proc.pid)
    codes = sorted(r.status_code for r in answers)
    assert codes == [303] + [409] * 7, [(r.status_code, r.text[-300:]) for r in answers]
    for r in answers:
        if r.status_code == 409:
            assert "AlreadyDecidedError" in r.text or "already" in r.text, r.text
            assert "another writer" not in r.text and f"pid {pid}" not in r.text
    resolved = [e for e in events(_url(crashed), "incident-7") if e.kind == "resolved"]
    assert len(resolved) == 1


def test_a_second_resolve_is_a_conflict_naming_already_decided(crashed: Path) -> None:
    form = {"id": "incident-7", "intent_seq": "19", "action": "retry"}
    with console(_url(crashed), allow_writes=True, token=TOKEN) as (client, _):
        auth = {"authorization": f"Bearer {TOKEN}"}
        first = client.post("/resolve", data=form, headers=auth, follow_redirects=False)
        assert first.status_code == 303
        again = client.post("/resolve", data=form, headers=auth)
    assert again.status_code == 409
    assert "AlreadyDecidedError" in again.text


# -- 20: hostile form and query values: a clear 4xx, never a 500 ----------------------------


def test_a_deeply_nested_result_is_refused_clearly(crashed: Path) -> None:
    deep = "[" * 2000 + "]" * 2000
    with console(_url(crashed), allow_writes=True, token=TOKEN) as (client, _):
        r = client.post(
            "/resolve",
            data={"id": "incident-7", "intent_seq": "19", "action": "result", "value": deep},
            headers={"authorization": f"Bearer {TOKEN}"},
        )
    assert r.status_code == 400, r.text[-500:]
    assert "RecursionError" not in r.text and "nested" in r.text
    assert status(_url(crashed), "incident-7").status == "in_doubt"  # nothing stored


_HOSTILE_VALUES = (
    "",
    "-1",
    "0",
    "1e999",
    "inf",
    "nan",
    "NaN",
    "Infinity",
    "9" * 30,
    "9" * 5000,
    str(2**63),
    str(-(2**63) - 1),
    "[" * 2000 + "]" * 2000,
    '{"a":' * 1500 + "1" + "}" * 1500,
    "x" * 100_000,
    "\x00",
    "\ud800".encode("utf-8", "surrogatepass").decode("latin-1"),
    "<script>",
)

_GETS: dict[str, tuple[str, ...]] = {
    "/": ("status", "class", "q", "sort", "desc", "offset"),
    "/actor": ("id", "before", "notice"),
    "/queue": (),
    "/verify": ("id", "run"),
    "/entry": ("id", "seq"),
    "/fork": ("id", "at"),
    "/delete": ("id",),
    "/deleted": ("notice",),
    "/login": ("token",),
}

_POSTS: dict[str, dict[str, str]] = {
    "/resolve": {"id": "incident-7", "intent_seq": "19", "action": "result", "value": "1"},
    "/fork": {"id": "incident-7", "at": "5", "new_id": "f-1", "seen": "0"},
    "/cancel": {"id": "incident-7", "reason": "r"},
    "/terminate": {"id": "no-such-actor", "reason": "r"},
    "/delete": {"id": "no-such-actor", "confirm": "yes"},
}


def _is_a_result(value: str) -> bool:
    """Whether the console would record ``value`` as a result (plain JSON)."""
    try:
        json.loads(value, parse_constant=lambda c: 1 / 0)
    except (ValueError, RecursionError, ZeroDivisionError):
        return False
    return len(value) < 1000


def _check(r: httpx.Response | Any, where: str) -> None:
    assert r.status_code < 500, f"{where}: {r.status_code} {r.text[-400:]}"
    assert "Traceback" not in r.text and "RecursionError" not in r.text, where


def test_every_query_parameter_with_hostile_values_is_a_page_or_a_clear_4xx(
    crashed: Path,
) -> None:
    before = status(_url(crashed), "incident-7")
    with console(_url(crashed), allow_writes=True, token=TOKEN) as (client, _):
        for path, names in _GETS.items():
            for name in names:
                for value in _HOSTILE_VALUES:
                    value = value[:30_000]  # a URL holds at most 64 kB
                    params = {"id": "incident-7", name: value}
                    _check(client.get(path, params=params), f"GET {path} {name}={value[:20]!r}")
    after = status(_url(crashed), "incident-7")
    assert (after.status, after.last_seq) == (before.status, before.last_seq)


def test_every_form_field_with_hostile_values_is_a_clear_4xx_and_stores_nothing(
    crashed: Path,
) -> None:
    url = _url(crashed)
    before = status(url, "incident-7")
    with console(url, allow_writes=True, token=TOKEN) as (client, _):
        auth = {"authorization": f"Bearer {TOKEN}"}
        for path, form in _POSTS.items():
            for name in form:
                for value in _HOSTILE_VALUES:
                    if path == "/resolve" and name == "value" and _is_a_result(value):
                        continue  # a valid JSON result: it would be recorded
                    if name in ("reason", "new_id") and value not in ("", "\x00"):
                        continue  # free text: it would be a valid write
                    r = client.post(path, data={**form, name: value}, headers=auth)
                    _check(r, f"POST {path} {name}={value[:20]!r}")
    after = status(url, "incident-7")
    assert (after.status, after.last_seq) == (before.status, before.last_seq)
    assert [e.kind for e in events(url, "incident-7") if e.kind == "resolved"] == []


# -- 21: the console accepts the loopback host it serves ------------------------------------


def test_serve_on_another_loopback_address_accepts_its_own_host(crashed: Path) -> None:
    with serve(crashed, host="127.0.0.2") as s:
        assert s.base.startswith("http://127.0.0.2:")
        assert f"actorlog console for {crashed} at {s.base}/" in s.banner
        r = httpx.get(s.base + "/")
        assert r.status_code == 200 and 'data-actor="incident-7"' in r.text
        rebound = httpx.get(s.base + "/", headers={"host": "evil.example"})
        assert rebound.status_code == 400


# -- 22: one in-doubt derivation; damage and a missing store --------------------------------


@attrs.define
class Note:
    text: str


@attrs.define
class Sent:
    n: int = 0


@tool(effect="write", idempotent=True, name="send_mail")
async def send_mail(text: str, *, idempotency_key: str) -> str:
    if text == "hang":
        _hung.set()
        await anyio.sleep_forever()
    return f"sent {text}"


_hung = threading.Event()


class Mailer(Actor[Sent]):
    async def receive(self, ctx: Context, msg: Note) -> str:
        out = await ctx.call(send_mail, msg.text)
        self.state.n += 1
        return out


def _auto_in_doubt(db: Path) -> None:
    """``mail-1`` stopped mid-``send_mail``: an idempotent write the runtime settles itself
    on recovery (state ``auto``); and ``quiet-1`` with no call in doubt."""

    async def run() -> None:
        _hung.clear()
        store = SqliteStore(db)
        async with ActorSystem(store, actors=[Mailer], shutdown_grace=0) as system:
            quiet = await system.spawn(Mailer, "quiet-1")
            await quiet.ask(Note("hello"))
            ref = await system.spawn(Mailer, "mail-1")
            await ref.send(Note("hang"), message_id="h")
            with anyio.fail_after(10):
                while not _hung.is_set():
                    await anyio.sleep(0.01)

    anyio.run(run, backend="asyncio")


def _cells(page: str, actor_id: str) -> list[str]:
    row = re.search(rf'<tr[^>]*data-actor="{re.escape(actor_id)}".*?</tr>', page, re.S)
    assert row is not None, actor_id
    return [
        html.unescape(re.sub(r"<[^>]+>", "", c)).strip()
        for c in re.findall(r"<td[^>]*>(.*?)</td>", row.group(0), re.S)
    ]


def test_the_overview_in_doubt_column_is_the_cli_one(tmp_path: Path) -> None:
    db = tmp_path / "mail.db"
    _auto_in_doubt(db)
    listing = cli("actors", db)
    assert listing.code == 0, listing.err
    line = next(x for x in listing.out.splitlines() if x.startswith("mail-1"))
    assert "send_mail (auto)" in line
    quiet_line = next(x for x in listing.out.splitlines() if x.startswith("quiet-1"))
    assert quiet_line.rstrip().endswith("-")
    with console(_url(db)) as (client, _):
        page = client.get("/").text
    mail = _cells(page, "mail-1")
    assert any("send_mail (auto)" in c for c in mail), mail
    assert _cells(page, "quiet-1")[-1] == "-"  # the CLI's '-', not 0


def test_the_overview_shows_the_cli_dash_and_the_waiting_call(crashed: Path) -> None:
    with console(_url(crashed)) as (client, _):
        page = client.get("/").text
    cells = _cells(page, "incident-7")
    assert cells[-1] == "19 page_oncall", cells


def test_a_missing_store_answers_503(crashed: Path) -> None:
    with console(_url(crashed), allow_writes=True, token=TOKEN) as (client, _):
        sign_in(client)
        csrf = csrf_of(client.get("/actor", params={"id": "incident-7"}).text)
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(crashed) + suffix)
            if p.exists():
                p.rename(str(p) + ".gone")
        r = client.post(
            "/resolve",
            data={"id": "incident-7", "intent_seq": "19", "action": "retry", "csrf": csrf},
        )
    assert r.status_code == 503, r.text[-300:]
    assert "no SQLite store" in r.text


def test_a_store_that_is_not_a_store_answers_503(crashed: Path, tmp_path: Path) -> None:
    with console(_url(crashed), allow_writes=True, token=TOKEN) as (client, _):
        sign_in(client)
        csrf = csrf_of(client.get("/actor", params={"id": "incident-7"}).text)
        for suffix in ("-wal", "-shm"):
            p = Path(str(crashed) + suffix)
            if p.exists():
                p.unlink()
        size = os.path.getsize(crashed)
        crashed.write_bytes(b"\xde\xad" * (size // 2))  # the file overwritten in place
        write = client.post(
            "/resolve",
            data={"id": "incident-7", "intent_seq": "19", "action": "retry", "csrf": csrf},
        )
        read = client.get("/actor", params={"id": "incident-7"})
    assert write.status_code == 503, write.text[-300:]
    assert read.status_code == 503, read.text[-300:]


def test_a_live_stream_reports_damage_found_after_it_opened(crashed: Path) -> None:
    with serve(crashed) as s:
        with httpx.stream(
            "GET", s.base + "/actor/live", params={"id": "incident-7"}, timeout=30
        ) as r:
            lines = r.iter_lines()
            first = _next(lines, "update")
            assert first["status"] == "in_doubt"
            flip_byte(crashed, 19)  # the in-doubt intent, after the last snapshot
            report = _next(lines, "update", "problem")
        page = httpx.get(s.base + "/actor", params={"id": "incident-7"}).text
    assert "quarantined" in page  # what a new request reports ...
    assert report.get("status") == "quarantined" or "damaged" in report.get("message", "")
    assert "seq 19" in (report.get("head", "") + report.get("message", ""))  # ... the stream too


def _next(lines: Any, *names: str) -> dict[str, Any]:
    event = None
    for line in lines:
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: ") and event in names:
            data: dict[str, Any] = json.loads(line[6:])
            return data
    raise AssertionError("the stream ended")


# -- 29.6: pretty JSON with line breaks -----------------------------------------------------


def test_an_expanded_reply_breaks_lines_and_still_escapes_control_characters(
    tmp_path: Path,
) -> None:
    db = tmp_path / "chat.db"

    async def run() -> None:
        from tests.web._agents import Chat, Say

        async with ActorSystem(SqliteStore(db), actors=[Chat]) as system:
            ref = await system.spawn(Chat, "chat-1")
            await ref.ask(Say("line one\nline two \x1b[31m " + "y" * 120))

    anyio.run(run, backend="asyncio")
    with console(_url(db)) as (client, _):
        page = client.get("/actor", params={"id": "chat-1"}).text
    out = tmp_path / "h.html"
    r = cli("history", db, "chat-1", "--html", out)
    assert r.code == 0, r.err
    for text in (page, out.read_text("utf-8")):
        pres = re.findall(r"<pre>(.*?)</pre>", text, re.S)
        assert pres, "a long value is shown pretty in a <pre>"
        assert all("\\x0a" not in p for p in pres)
        assert any("\n" in p for p in pres)  # the formatter's own line breaks
        assert "\x1b" not in text  # control characters in values stay escaped
