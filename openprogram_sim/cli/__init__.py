"""``openprogram-sim``: run scenario files, serve them over HTTP, fuzz the loop, record
real sessions as cassettes, check traces, evaluate against real models.

    openprogram-sim run [PATHS...] [--json] [-k TEXT] [-m TAG] [--report PATH]
                        [--pythonpath DIR] [--model PROVIDER:MODEL [--base-url URL]]
    openprogram-sim schema [-o FILE]
    openprogram-sim init REF [-o FILE]
    openprogram-sim serve SCENARIO [--host H] [--port N]
    openprogram-sim fuzz [--examples N] [--seed S] [--workers K] [--regressions DIR]
    openprogram-sim record SCENARIO [--model PROVIDER:MODEL] [--cassette PATH]
                           [--base-url URL] [--record-mode MODE]
    openprogram-sim distill CASSETTE [--scenario SCENARIO] [-o FILE]
    openprogram-sim check TRACE_FILE [--properties FILE] [--trajectory FILE]
    openprogram-sim eval SCENARIO... --model PROVIDER:MODEL [--base-url URL] [--samples N]
                         [--threshold P] [--json FILE] [--baseline FILE]

One module per subcommand (``run``, ``schema``, ``init``, ``serve``, ``fuzz``, ``record``,
``distill``, ``check``, ``eval``).

``check`` reads a trace that did not come from a run here (``run --json``'s output, a
trace written by hand) and checks it with a suite's ``expect.properties`` and
``expect.trajectory`` rules: 0 when every trace holds them, 1 when one does not, 2 when a
file cannot be read.

``run`` prints one line per scenario (verdict, rounds, duration, title), then the diff of
each failure and a summary; a progress bar is drawn on stderr for long runs in a terminal.
The exit status is 0 only when every scenario passed (1: a scenario failed, 2: a file
could not be loaded or the command was misused).
"""

from openprogram_sim.cli._main import build_parser, main
from openprogram_sim.cli.run import ScenarioResult, run_paths

__all__ = ["ScenarioResult", "build_parser", "main", "run_paths"]
