"""The store contract: actorlog's own stores run the public kit (``actorlog.testing``).

Each test of :class:`actorlog.testing.StoreContract` runs once per store kind (``memory``,
``sqlite``, ``sqlite-on-loop``, ``postgres``) and backend (asyncio, trio; PostgreSQL on
asyncio only): the ``harness`` and ``anyio_backend`` fixtures are parametrized over them, and
tests a kind cannot apply to (``needs`` against the harness's ``lacks``) are deselected.
The contract itself is written down in the docstring of :mod:`actorlog.store`.
"""

from __future__ import annotations

import pytest
from actorlog.testing import StoreContract


class TestContract(StoreContract):
    """Every contract test, on every store of actorlog (the harness comes from conftest),
    on asyncio and on trio (PostgreSQL's trio cases are deselected: asyncpg is asyncio-only).
    """

    @pytest.fixture(params=["asyncio", "trio"])
    def anyio_backend(self, request: pytest.FixtureRequest) -> str:
        """Both backends (the kit's own fixture says asyncio only, for third-party stores)."""
        return request.param  # type: ignore[no-any-return]  # pytest params are untyped
