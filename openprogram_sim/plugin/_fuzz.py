"""A fuzz campaign as pytest items (``pytest --openprogram-fuzz N``): one item per chunk.

The campaign ``(N, seed, chunk size)`` is cut into chunks whose seeds derive from the
campaign seed and the chunk's index alone, so each item runs the same cases whichever
process, pytest-xdist worker or host runs it: ``pytest -n auto --openprogram-fuzz 100000``
spreads a campaign over cores with no scheduler of ours, and the same seed gives the same
cases whatever the number of workers. A chunk that finds a violation fails with the
violations and the shrunk case (written as a regression file with
``--openprogram-fuzz-regressions DIR``).
"""

from __future__ import annotations

from typing import Any

import pytest

__all__ = ["FuzzChunkFailed", "FuzzChunkItem", "FuzzHooks"]


class FuzzChunkFailed(AssertionError):
    """A chunk found a run that broke the loop's invariants."""


class FuzzChunkItem(pytest.Item):
    """One chunk of a fuzz campaign."""

    def __init__(self, *, index: int, count: int, options: dict[str, Any], **kwargs: Any):
        super().__init__(**kwargs)
        self.index = index
        self.count = count
        self.options = options
        self.add_marker("openprogram_fuzz")

    def runtest(self) -> None:
        from openprogram_sim.fuzz.loop import run_chunk

        done = run_chunk(self.index, **self.options)
        self.user_properties += [
            ("runs", done.runs),
            ("runs_per_s", round(done.runs / done.elapsed) if done.elapsed else 0),
            ("chunk_seed", done.seed),
        ]
        failure = done.failure
        if failure is None:
            return
        import yaml

        where = f"written to {failure.path}" if failure.path else (failure.unexpressed or "")
        raise FuzzChunkFailed(
            "\n".join(
                [
                    f"invariant violated in chunk {self.index + 1}/{self.count} "
                    f"(campaign seed {self.options['seed']}, chunk seed {done.seed}):",
                    *(f"  - {v}" for v in failure.violations),
                    f"regression file: {where}" if where else "",
                    "shrunk case:",
                    yaml.safe_dump(failure.scenario, sort_keys=False, allow_unicode=True),
                ]
            )
        )

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, FuzzChunkFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style="short")

    def reportinfo(self) -> tuple[str, int | None, str]:
        return "openprogram-fuzz", None, f"fuzz chunk {self.index + 1}/{self.count}"


class FuzzHooks:
    """Adds the campaign's chunks to the collected items (registered only when
    ``--openprogram-fuzz`` is given)."""

    def __init__(self, config: pytest.Config) -> None:
        self.examples = int(config.getoption("openprogram_fuzz"))
        self.seed = int(config.getoption("openprogram_fuzz_seed"))
        self.chunk = int(config.getoption("openprogram_fuzz_chunk"))
        self.regressions = config.getoption("openprogram_fuzz_regressions")
        if self.examples < 0 or self.chunk < 1:
            raise pytest.UsageError(
                "--openprogram-fuzz needs N >= 0 and --openprogram-fuzz-chunk >= 1"
            )

    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        from openprogram_sim.fuzz.loop import chunk_count

        count = chunk_count(self.examples, self.chunk)
        options = {
            "examples": self.examples,
            "seed": self.seed,
            "chunk_size": self.chunk,
            "regressions": self.regressions,
        }
        for index in range(count):
            name = f"openprogram_fuzz[seed{self.seed}-{index + 1}of{count}]"
            items.append(
                FuzzChunkItem.from_parent(
                    session, name=name, index=index, count=count, options=options
                )
            )
