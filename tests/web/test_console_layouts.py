"""The console's reads (docs/operators.md, "The console") of a format-5 file beside a format-4
one, from outside: ``actorlog serve`` as a real process over a file a runtime wrote (an actor
compacted by its retention, ten others), its pages fetched over HTTP. Both files show the same
actors, steps, entries and verification; a hostile query parameter is answered 400 or 404
with the error's type, and the file is not changed."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import httpx
import pytest

from tests.cli._layouts import copy, made
from tests.web._serve import serve


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    return made(tmp_path_factory)


def _digest(path: Path) -> tuple[str, str]:
    wal = path.with_name(path.name + "-wal")
    return (
        hashlib.sha256(path.read_bytes()).hexdigest(),
        hashlib.sha256(wal.read_bytes() if wal.exists() else b"").hexdigest(),
    )


@pytest.mark.parametrize("layout", [4, 5], ids=["format4", "format5"])
def test_the_console_reads_both_layouts_alike(
    tmp_path: Path, origin: dict[int, Path], layout: int
) -> None:
    path = copy(origin[layout], tmp_path)
    db = sqlite3.connect(path)
    ((first, last),) = db.execute("SELECT first_seq, last_seq FROM actors WHERE actor_id = 'r1'")
    db.close()
    assert first > 1
    before = _digest(path)
    with serve(path) as s:

        def get(url: str) -> httpx.Response:
            return httpx.get(s.base + url, timeout=30)

        overview = get("/")
        assert overview.status_code == 200
        assert overview.text.count("data-actor=") == 11 and 'data-actor="r1"' in overview.text
        page = get("/actor?id=r1")
        assert page.status_code == 200 and "answer to q29" in page.text
        older = get(f"/actor?id=r1&before={first + 8}")
        assert older.status_code == 200 and "answer to q29" not in older.text
        entry = get(f"/entry?id=r1&seq={last}")
        assert entry.status_code == 200 and "answer to q29" in entry.text
        verify = get("/verify?run=1")
        assert verify.status_code == 200 and "no damage" in verify.text, verify.text
        # hostile parameters: the error's type, nothing read beyond, nothing written
        for url, status, error in [
            ("/actor?id=r1&before=" + str(2**70), 400, "ConfigurationError"),
            ("/entry?id=r1&seq=" + str(2**64), 400, "ConfigurationError"),
            ("/entry?id=r1&seq=x", 400, "ConfigurationError"),
            (f"/entry?id=r1&seq={2**32 + 1}", 404, "ActorNotFoundError"),
            (f"/entry?id=r1&seq={first - 1}", 404, "ActorNotFoundError"),
            ("/actor?id=nobody", 404, "ActorNotFoundError"),
            ("/verify?id=nobody", 404, "ActorNotFoundError"),
        ]:
            r = get(url)
            assert (r.status_code, r.headers.get("x-actorlog-error")) == (status, error), url
        # an actor's window past the format's seqs shows the newest steps, not another actor's
        far = get(f"/actor?id=x00&before={2**32 + 5}")
        assert far.status_code == 200 and "answer to q" not in far.text
    assert _digest(path) == before
