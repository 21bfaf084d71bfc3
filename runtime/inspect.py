"""The old name of :mod:`actorlog.ops`, kept so that ``from actorlog import inspect`` works.

Everything here is :mod:`actorlog.ops` (the same objects); new code imports ``actorlog.ops``,
whose name does not shadow the standard library's ``inspect``.
"""

from __future__ import annotations

from .ops import *  # noqa: F403  # the whole public API of actorlog.ops, under the old name
from .ops import __all__ as __all__
