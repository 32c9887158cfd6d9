"""How often a run's followers are woken: a pure rule (see ``wake_interval``)."""

from __future__ import annotations

__all__ = ["WAKE_BUDGET", "WAKE_PER_FOLLOWER", "wake_interval"]

WAKE_BUDGET = 0.05
"""The share of the event loop that waking a run's followers may take."""

WAKE_PER_FOLLOWER = 0.00025
"""Seconds between wake-ups of a run's followers at the least, per follower."""


def wake_interval(*, followers: int, took: float, longest: float) -> float:
    """Seconds from one wake-up of a run's followers to the next.

    ``took`` is how long the followers took to take the last wake-up (from waking them to the
    last of them waiting again: their reading, and a server's writes to its clients). The
    interval is long enough for that to be at most ``WAKE_BUDGET`` of the loop, and at least
    ``WAKE_PER_FOLLOWER`` per follower, but never longer than ``longest``: every follower then
    gets the changes of the interval together (fragments joined), at the price of a delay.
    """
    return min(longest, max(WAKE_PER_FOLLOWER * followers, took / WAKE_BUDGET))
