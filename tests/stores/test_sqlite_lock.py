"""One runtime per SQLite file (DESIGN.md section 10, "One owner per log"), with real processes.

Two runtimes on one file each treated the other's running call as in doubt and ran effects
twice. A writable ``SqliteStore`` holds an OS lock beside the file from ``open`` to ``close``;
the kernel drops it when the process dies (SIGKILL included).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from actorlog import ActorSystem, StoreLockedError, ops
from actorlog.stores import SqliteStore

from tests.torture.helpers import Add, Counter, Get

pytestmark = pytest.mark.anyio

FORK_ARGS = ["--at", "1", "--as", "b", "--yes"]

HOLDER = textwrap.dedent(
    """
    import sys, anyio
    from actorlog import ActorSystem
    from actorlog.stores import SqliteStore
    from tests.torture.helpers import Add, Counter, Get

    async def main():
        async with ActorSystem(SqliteStore(sys.argv[1]), actors=[Counter]) as system:
            ref = await system.spawn(Counter, "a")
            await ref.ask(Add(1), message_id="m1")
            print("ready", flush=True)
            await anyio.sleep_forever()

    anyio.run(main, backend="asyncio")
    """
)


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """A process running an ActorSystem on ``tmp_path/agents.db``, until killed."""
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path / "agents.db")],
        stdout=subprocess.PIPE,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=60)
        if proc.stdout is not None:
            proc.stdout.close()


async def test_a_second_runtime_is_refused_naming_the_holder_until_it_dies(
    tmp_path: Path, holder: subprocess.Popen[str]
) -> None:
    path = tmp_path / "agents.db"
    with pytest.raises(StoreLockedError) as info:
        async with ActorSystem(SqliteStore(path), actors=[Counter]):
            pass
    err = info.value
    assert f"pid {holder.pid}" in str(err) and socket.gethostname() in str(err)
    assert " since " in str(err) and str(path) in str(err)

    # readers are welcome meanwhile
    async with ops.opened(f"sqlite:///{path}") as store:
        assert [a.actor_id for a in await ops.list_actors(store)] == ["a"]
        assert (await ops.verify(store)).ok
    # offline writers (actorlog resolve / fork) are refused, and told what to do
    with pytest.raises(StoreLockedError, match="Stop that runtime first"):
        async with ops.opened(f"sqlite:///{path}", read_only=False):
            pass
    fork = await anyio.run_process(
        [sys.executable, "-m", "actorlog.cli._main", "fork", f"sqlite:///{path}", "a", *FORK_ARGS],
        check=False,
    )
    stderr = fork.stderr.decode()
    assert fork.returncode == 2 and "Stop that runtime first" in stderr, stderr
    assert f"pid {holder.pid}" in stderr

    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=60)
    async with ActorSystem(SqliteStore(path), actors=[Counter]) as system:
        ref = await system.spawn(Counter, "a")
        await ref.ask(Add(2), message_id="m2")
        assert (await ref.ask(Get()))["seen"] == [1, 2]


async def test_the_lock_is_released_at_close_and_taken_per_open(tmp_path: Path) -> None:
    path = tmp_path / "agents.db"
    first = SqliteStore(path)
    await first.open()
    second = SqliteStore(path)
    with pytest.raises(StoreLockedError, match=f"pid {os.getpid()}"):
        await second.open()
    reader = SqliteStore(path, read_only=True)
    await reader.open()
    await reader.close()
    await first.close()
    await second.open()  # released at close
    await second.close()
    assert not SqliteStore(path).capabilities.multi_process
