"""The suite's knobs for long runs, shared by the torture suite, the model test and the root
conftest (which passes one torture seed to every pytest-xdist worker).

* ``ACTORLOG_SOAK=1`` runs x10 the iterations and examples; ``ACTORLOG_SOAK_ITERATIONS=N``
  xN (``ACTORLOG_SOAK=0`` or unset: the CI default, x1).
* ``ACTORLOG_TORTURE_SEED=N`` replays a session; without it the first call of
  :func:`base_seed` draws one and puts it in the environment, so the processes started
  afterwards (the xdist workers) use the same one.
"""

from __future__ import annotations

import os
import random

SEED_VAR = "ACTORLOG_TORTURE_SEED"


def soak_factor() -> int:
    """How much longer than the CI default to run (1 in CI)."""
    n = os.environ.get("ACTORLOG_SOAK_ITERATIONS")
    if n:
        return max(1, int(n))
    return 10 if os.environ.get("ACTORLOG_SOAK", "") not in ("", "0") else 1


def base_seed() -> int:
    """The session's torture base seed: ``ACTORLOG_TORTURE_SEED``, or a fresh one that is
    then set there (for the worker processes started later)."""
    given = os.environ.get(SEED_VAR)
    if given:
        return int(given)
    seed = random.SystemRandom().randrange(10**6)
    os.environ[SEED_VAR] = str(seed)
    return seed
