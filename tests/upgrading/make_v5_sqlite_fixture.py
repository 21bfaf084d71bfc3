"""Write ``fixtures/payer_format_v5.db``: the store of ``make_v1_sqlite_fixture`` (actor
``pay-1`` answered ``q1`` under a snapshot, then SIGKILL inside the tool of ``q2``, an
idempotent write in doubt), written by actorlog in format version 5 (``log`` a rowid table,
the intents and steps packed, FORMAT.md [F24]). Committed; regenerate only with the format-5
code on the path (the commit that added this file, or any later one still writing format 5)::

    python -m tests.upgrading.make_v5_sqlite_fixture
"""

from __future__ import annotations

import os

from .make_v1_sqlite_fixture import HERE, make

FIXTURE = os.path.join(HERE, "fixtures", "payer_format_v5.db")

if __name__ == "__main__":
    make(FIXTURE)
