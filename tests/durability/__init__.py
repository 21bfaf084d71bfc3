"""Tests of actorlog._durability: commits, message ids, snapshots, retention, lifecycle, in-doubt
decisions.
"""
