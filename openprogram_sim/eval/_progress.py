"""The progress bar of a long eval, on stderr: samples counted, the pass rate so far and
the time left at most (the samples still to take, at the pace so far; a verdict decided
sooner ends it sooner).

Drawn with rich when it is installed (``pip install 'openprogram-sim[progress]'``), else as
one plain line rewritten in place. Only on a terminal: never when stderr is a pipe or a
file (CI logs), nor with ``-q``; the ``--json`` file and stdout never hold it.
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Any, TextIO

from openprogram_sim.eval._scheduling import Tally

__all__ = ["ProgressBar", "describe"]


def _clock(seconds: float) -> str:
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def describe(tally: Tally) -> str:
    """What the bar says beside it: ``12/40 samples  pass 0.750  ≤0:41 left``."""
    total = tally.done + tally.remaining
    rate = f"pass {tally.passed / tally.done:.3f}" if tally.done else "pass -"
    if tally.done and tally.remaining:
        left = f"≤{_clock(tally.elapsed / tally.done * tally.remaining)} left"
    elif tally.done:
        left = "done"
    else:
        left = "ETA -"
    return f"{tally.done}/{total} samples  {rate}  {left}"


class ProgressBar:
    """The bar, as a context manager; :meth:`update` takes each :class:`Tally`. Disabled
    (every call a no-op) unless ``enabled`` and ``stream`` is a terminal."""

    def __init__(self, total: int, *, stream: TextIO | None = None, enabled: bool = True) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.total = total
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = enabled and bool(isatty and isatty())
        self._rich: Any = None
        self._task: Any = None
        self._width = 0
        self._last = ""

    def __enter__(self) -> ProgressBar:
        if not self.enabled:
            return self
        try:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn
        except ImportError:
            self._plain(f"0/{self.total} samples  pass -  ETA -")
            return self
        console = Console(file=self.stream)
        self._rich = Progress(
            TextColumn("eval"),
            BarColumn(),
            TextColumn("{task.description}"),
            console=console,
            transient=True,
            # the summary lines printed meanwhile go above the bar when both are this
            # terminal; a piped stdout is left alone
            redirect_stdout=sys.stdout.isatty(),
            redirect_stderr=False,
        )
        self._rich.start()
        self._task = self._rich.add_task(f"0/{self.total} samples  pass -  ETA -", total=self.total)
        return self

    def update(self, tally: Tally) -> None:
        if not self.enabled:
            return
        text = describe(tally)
        if self._rich is not None:
            total = tally.done + tally.remaining
            self._rich.update(self._task, completed=tally.done, total=total, description=text)
        else:
            self._plain(text)

    def echo(self, text: str, file: TextIO) -> None:
        """Print ``text`` (a line or lines) to ``file`` without tearing the bar: the plain
        bar is cleared first and drawn again after."""
        plain = self.enabled and self._rich is None and self._width
        if plain:
            self.stream.write("\r" + " " * (self._width + 6) + "\r")
            self.stream.flush()
        print(text, file=file, flush=True)
        if plain:
            self._plain(self._last)

    def _plain(self, text: str) -> None:
        self._last = text
        pad = max(self._width - len(text), 0)
        self.stream.write(f"\reval  {text}{' ' * pad}")
        self.stream.flush()
        self._width = len(text)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self.enabled:
            return
        if self._rich is not None:
            self._rich.stop()
        else:
            self.stream.write("\r" + " " * (self._width + 6) + "\r")
            self.stream.flush()
