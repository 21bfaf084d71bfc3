"""Tests of actorlog._effects: ctx.call, tools and retries, concurrent effects in a step,
cancellation, live equals replay.
"""
