"""A virtual clock: scripted latency advances it without sleeping for real."""

from __future__ import annotations

import asyncio

__all__ = ["VirtualClock"]


class VirtualClock:
    """Time that only moves when something waits on it.

    ``await clock.sleep(2.5)`` advances :attr:`now` by 2.5 seconds and yields to the event
    loop once, so a scripted model with latency still interleaves with other tasks (an
    abort, say) but a test never waits.
    """

    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    async def sleep(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"cannot sleep a negative time ({seconds})")
        self.now += seconds
        await asyncio.sleep(0)
