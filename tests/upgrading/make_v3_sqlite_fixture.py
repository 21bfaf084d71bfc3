"""Write ``fixtures/payer_format_v3.db``: the store of ``make_v1_sqlite_fixture`` (actor
``pay-1`` answered ``q1`` under a snapshot, then SIGKILL inside the tool of ``q2``, an
idempotent write in doubt), written by actorlog in format version 3 (the log in ``log`` with
integer codes, payloads as written, FORMAT.md "Format history"). Committed; regenerate only
with the format-3 code on the path (commit 126c181)::

    git archive 126c181 runtime stores | tar -x -C /tmp/old && mkdir -p /tmp/old/pkg && \\
      cp -r /tmp/old/runtime /tmp/old/pkg/actorlog && \\
      cp -r /tmp/old/stores /tmp/old/pkg/actorlog/stores && \\
      PYTHONPATH=/tmp/old/pkg python -m tests.upgrading.make_v3_sqlite_fixture
"""

from __future__ import annotations

import os

from .make_v1_sqlite_fixture import HERE, make

FIXTURE = os.path.join(HERE, "fixtures", "payer_format_v3.db")

if __name__ == "__main__":
    make(FIXTURE)
