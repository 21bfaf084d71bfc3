"""The operator console in the browser: ``actorlog serve STORE`` (``pip install 'actorlog[web]'``).

A Starlette application over any store, reading through :mod:`actorlog.ops` (the same operator
API the command line uses): an overview of every actor, each actor's timeline updating live,
the in-doubt queue with resolve and fork, cancel, terminate and delete, the deleted actors, and
``verify``. Read-only unless started with ``--allow-writes``; writes need the token printed at
start (see docs/operators.md).

This package imports Starlette, Jinja2 and uvicorn; nothing else in ``actorlog`` imports it.
"""

from __future__ import annotations

from .app import create_app
from .config import ServeConfig

__all__ = ["ServeConfig", "create_app"]
