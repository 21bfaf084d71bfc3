"""The store contract: actorlog's own stores run the public kit (``actorlog.testing``).

Each test of :class:`actorlog.testing.StoreContract` runs once per store kind (``memory``,
``sqlite``, ``sqlite-on-loop``, ``postgres``): the ``harness`` fixture of conftest.py is
parametrized over them, and tests a kind cannot apply to (``needs`` against the harness's
``lacks``) are deselected.
The contract itself is written down in the docstring of :mod:`actorlog.store`.
"""

from __future__ import annotations

from actorlog.testing import StoreContract


class TestContract(StoreContract):
    """Every contract test, on every store of actorlog (the harness comes from conftest)."""
