"""Sets and frozensets have one canonical encoding, whatever the hash seed (FORMAT.md [F9a],
DESIGN.md section 5 step 3): issue 24, item 13."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from actorlog._journal import codec as _codec
from actorlog.testing import replay
from hypothesis import HealthCheck, given, settings, strategies as st

from ..runtime._setvalues import WORDS, Box, Counter, Model, Tag, Typed

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ("0", "1", "4242")


def _env(seed: str) -> dict[str, str]:
    return {**os.environ, "PYTHONHASHSEED": seed}


class _Worker:
    def __init__(self, seed: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.runtime.set_worker", "encode"],
            cwd=ROOT,
            env=_env(seed),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def encode(self, reprs: list[str]) -> list[str]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("".join(r + "\n" for r in reprs))
        self.proc.stdin.flush()
        return [self.proc.stdout.readline().strip() for _ in reprs]

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.proc.stdout.close()


@pytest.fixture(scope="module")
def workers() -> Iterator[list[_Worker]]:
    made = [_Worker(seed) for seed in SEEDS]
    try:
        yield made
    finally:
        for w in made:
            w.close()


_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=6)
_scalar = st.one_of(
    _text,
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.binary(max_size=4),
    st.datetimes(),
)
_hashable = st.recursive(
    st.one_of(_scalar, st.builds(Tag, _text, st.integers())),
    lambda inner: st.one_of(
        st.tuples(inner, inner), st.frozensets(inner, max_size=5), st.builds(Box, inner)
    ),
    max_leaves=8,
)
_sets = st.one_of(st.sets(_hashable, max_size=8), st.frozensets(_hashable, max_size=8))
_typed = st.builds(
    Typed,
    st.frozensets(_text, max_size=8),
    st.frozensets(st.integers(), max_size=8),
    st.frozensets(st.builds(Tag, _text, st.integers()), max_size=4),
)
_model = st.builds(
    Model,
    names=st.sets(_text, max_size=8),
    nested=st.frozensets(st.frozensets(st.integers(), max_size=4), max_size=4),
    by_key=st.dictionaries(_text, st.frozensets(_text, max_size=4), max_size=3),
)
_values = st.recursive(
    st.one_of(_sets, _typed, _model, _scalar),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(_text, inner, max_size=4),
        st.tuples(inner, inner),
        st.builds(Box, inner),
    ),
    max_leaves=12,
)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(values=st.lists(_values, min_size=1, max_size=8))
def test_set_encoding_is_the_same_under_every_hash_seed(
    workers: list[_Worker], values: list[Any]
) -> None:
    """Every supported set (of str, int, float, bytes, datetimes, tuples, attrs values,
    frozensets, mixed; nested in lists, dicts, tuples, attrs and pydantic models, typed or
    not) encodes to the
    same bytes, as a message and as tool arguments, in processes with different hash seeds."""
    reprs = [repr(v) for v in values]
    outputs = [w.encode(reprs) for w in workers]
    for other in outputs[1:]:
        assert other == outputs[0], reprs
    for out in outputs[0]:
        assert not out.startswith("E"), (reprs, outputs[0])


def test_set_order_is_by_element_encoding() -> None:
    """[F9a]: ordered by the elements' compact JSON texts; mixed types too."""
    value = {"b", "a", 10, 9, (1, 2), None, frozenset({"y", "x"}), b"\x00"}
    assert _codec.encode_json(value, "v") == b'["00","a","b",10,9,["x","y"],[1,2],null]'


def test_replay_compares_a_set_as_a_set_with_an_older_log() -> None:
    """A log written before [F9a] holds a set in its process's iteration order: replay
    accepts the same set in any order, and still tells a different set apart."""
    got = _codec.to_plain([{"b", "a", "c"}, {"k": frozenset({1, 2})}], "arguments")
    assert _codec.same_plain(got, [["c", "a", "b"], {"k": [2, 1]}])
    assert not _codec.same_plain(got, [["c", "a", "d"], {"k": [2, 1]}])
    assert not _codec.same_plain(got, [["c", "a"], {"k": [2, 1]}])
    # a list is still ordered
    assert not _codec.same_plain(_codec.to_plain([["b", "a"]], "a"), [["a", "b"]])


def _start(db: Path, mode: str, seed: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.runtime.set_worker", mode, str(db)],
        cwd=ROOT,
        env=_env(seed),
        stdout=subprocess.PIPE,
        text=True,
    )


def test_a_logged_set_argument_replays_under_another_hash_seed(tmp_path: Path) -> None:
    """A step calls a tool with a set (and a frozenset field); the runtime is SIGKILLed
    (no snapshot covers the step); a runtime with another hash seed replays the step with no
    ``NonDeterminismError`` and replay-check (a third seed, and the CLI) finds no divergence."""
    db = tmp_path / "sets.db"
    first = _start(db, "run", "1")
    assert first.stdout is not None
    line = first.stdout.readline().split()
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    first.stdout.close()
    assert line == ["DONE", str(2 * len(WORDS))], line
    second = _start(db, "again", "2")
    out, _ = second.communicate(timeout=60)
    assert out.split() == ["OK", str(4 * len(WORDS)), "idle"], out
    report = anyio.run(partial(replay, db, actors=[Counter]))
    assert report.ok and report.actors == 1 and report.steps == 2, report.lines()
    cli = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from actorlog.cli._main import main; sys.exit(main())",
            "replay-check",
            str(db),
            "--actors",
            "tests.runtime._setvalues:Counter",
        ],
        cwd=ROOT,
        env=_env("3"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cli.returncode == 0, cli.stdout + cli.stderr


def test_set_values_decode_back_into_sets() -> None:
    value = Typed(frozenset({"b", "a"}), frozenset({3, 1}), frozenset({Tag("x", 1)}))
    data = _codec.encode_json(value, "v")
    assert _codec.structure(_codec.decode_json(data), Typed) == value
