"""Write ``fixtures/payer_format_v4.db``: the store of ``make_v1_sqlite_fixture`` (actor
``pay-1`` answered ``q1`` under a snapshot, then SIGKILL inside the tool of ``q2``, an
idempotent write in doubt), written by actorlog in format version 4 (format 3's tables, the
intents and steps packed, FORMAT.md [F21]). Committed; regenerate only with the format-4
code on the path (the commit that added this file, or any later one still writing format 4)::

    python -m tests.upgrading.make_v4_sqlite_fixture
"""

from __future__ import annotations

import os

from .make_v1_sqlite_fixture import HERE, make

FIXTURE = os.path.join(HERE, "fixtures", "payer_format_v4.db")

if __name__ == "__main__":
    make(FIXTURE)
