"""``python -m actorlog.cli``: the ``actorlog`` command."""

from __future__ import annotations

import sys

from ._main import main

sys.exit(main())
