"""A runtime owning actor ``job-1`` on a PostgreSQL store, in another process
(``tests/cli/lifecycle_worker.py pg-own``): its step ``Slow`` blocks in a write tool until
an operator cancels or terminates it through the store's inbox. Its lines: ``in-tool``,
``outcome TYPE``, ``after VALUE-OR-TYPE``."""

from __future__ import annotations

import contextlib

from tests._owner import OwnerProcess, owning as _owning


def owning(url: str, schema: str) -> contextlib.AbstractContextManager[OwnerProcess]:
    """The owner, once its step is in the tool (``in-tool``); closed at the end."""
    return _owning("tests.cli.lifecycle_worker", "pg-own", url, schema, ready="in-tool")
