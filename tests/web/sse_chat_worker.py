"""examples/sse_chat/app.py for the tests, as it is, with its scripted model gated and counted.

    python -m tests.web.sse_chat_worker DB PORT WORKDIR

Each model request and weather lookup that runs appends a line to WORKDIR/marks (``plan``,
``answer``, ``weather``). The answer request stops after ``GATE_AT`` tokens until the file
WORKDIR/go exists: a test kills the process there, mid-answer, at a known point.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
from actorlog import tool

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sse_chat" / "app.py"
GATE_AT = 3

spec = importlib.util.spec_from_file_location("sse_chat_app", EXAMPLE)
assert spec is not None and spec.loader is not None
app: Any = importlib.util.module_from_spec(spec)  # loaded by path: untyped
sys.modules[spec.name] = app
spec.loader.exec_module(app)


def main() -> None:
    db, port, workdir = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    marks, go = workdir / "marks", workdir / "go"

    def mark(what: str) -> None:
        with marks.open("a") as f:
            f.write(what + "\n")

    class GatedModel(app.ScriptedModel):  # type: ignore[misc]  # a class loaded by path (Any)
        delay = 0.0

        async def stream(self, prompt: str) -> AsyncIterator[str]:
            kind = prompt.split(":")[0]
            mark(kind)
            n = 0
            async for token in super().stream(prompt):
                while kind == "answer" and n == GATE_AT and not go.exists():
                    await anyio.sleep(0.02)
                n += 1
                yield token

    weather = app.weather

    @tool(name="weather", effect="read")
    async def counted_weather(city: str) -> str:
        mark("weather")
        return str(await weather.fn(city))

    app.MODEL = GatedModel()
    app.weather = counted_weather
    sys.argv = [str(EXAMPLE), "--db", str(db), "--port", port, "--delay", "0"]
    app.main()


if __name__ == "__main__":
    main()
