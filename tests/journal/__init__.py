"""Tests of actorlog._journal: codec, records, names, ids, argument checks."""
