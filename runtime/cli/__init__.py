"""The ``actorlog`` command (docs/operators.md): ``main`` and the commands (``_main``), its parser
(``_parse``), and one module per family of commands (``_history``, ``_lifecycle``, ``_timers``,
``_check``). Uses the public API, ``actorlog.ops``, ``actorlog.testing``, ``actorlog.web``
(``actorlog serve``), ``_views`` and the journal layer; never the actor core's internals.
"""

from __future__ import annotations

from ._main import main

__all__ = ["main"]
