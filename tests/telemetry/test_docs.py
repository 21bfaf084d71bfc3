"""docs/tracing.md is the stable table: every span, attribute, event and metric name the code
emits is documented there, and the docs name none the code does not have."""

from __future__ import annotations

import re
from pathlib import Path

from actorlog._tracing.telemetry import ATTR, EVENT, METRIC, SPAN

DOC = Path(__file__).resolve().parents[2] / "docs" / "tracing.md"
NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")


def _values(cls: type) -> set[str]:
    return {v for k, v in vars(cls).items() if not k.startswith("_") and isinstance(v, str)}


def _documented() -> set[str]:
    """Backticked dotted names in the first column of the doc's tables."""
    names = set()
    for line in DOC.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^\| `([a-z0-9_.]+)` \|", line)
        if m and "." in m.group(1):
            names.add(m.group(1))
    return names


def test_every_name_is_documented_and_nothing_else_is() -> None:
    emitted = _values(SPAN) | _values(ATTR) | _values(EVENT) | _values(METRIC)
    documented = _documented()
    assert emitted - documented == set(), "emitted but not in docs/tracing.md"
    extra = {n for n in documented - emitted if n.startswith("actorlog.") or n == "error.type"}
    assert extra == set(), "documented but not emitted"


def test_names_follow_the_semantic_convention_style() -> None:
    for name in _values(SPAN) | _values(ATTR) | _values(EVENT) | _values(METRIC):
        assert NAME.match(name), name
        assert name.startswith("actorlog.") or name == "error.type", name


def test_the_screenshots_exist() -> None:
    for ref in re.findall(r"\]\((img/tracing-[a-z-]+\.png)\)", DOC.read_text(encoding="utf-8")):
        png = DOC.parent / ref
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", ref
