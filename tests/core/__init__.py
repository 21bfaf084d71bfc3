"""Tests of actorlog._core: the cell, delivery and recovery of one live actor."""
