"""The runner's wait for a run (its time limit): done in time, not done at the timer, and a
cancelled caller that leaves the run alone, as ``asyncio.wait`` does."""

from __future__ import annotations

import asyncio

from openprogram_sim.play._runner import _finished


def test_a_run_done_in_time_a_run_past_the_timer_and_a_cancelled_caller() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        quick = loop.create_task(asyncio.sleep(0, "done"))
        assert await _finished(quick, 5.0) is True
        assert await _finished(quick, 5.0) is True  # already done: no wait
        slow = loop.create_future()
        start = loop.time()
        assert await _finished(slow, 0.05) is False
        assert loop.time() - start >= 0.04 and not slow.done()
        waiting = loop.create_task(_finished(slow, 30.0))
        await asyncio.sleep(0)
        waiting.cancel()
        await asyncio.wait({waiting})
        assert waiting.cancelled() and not slow.cancelled()  # the run goes on
        slow.set_result(None)
        assert await _finished(slow, 30.0) is True

    asyncio.run(main())
