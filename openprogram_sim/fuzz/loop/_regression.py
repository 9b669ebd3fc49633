"""Writing a shrunk failing case as a scenario file whose ``expect:`` comes from the rules.

A regression file must fail against the loop that broke an invariant and pass against a
correct one, so nothing in it is copied from the failing run: the script, the steering
entries and every expectation are worked out from the scenario alone by
:func:`openprogram_sim.fuzz.loop._predict.predict`, which applies the seed's rules to the
scenario's own script and settings (see that module for the rules). From the prediction:

- ``model``: the turns a correct loop plays, in call order (a call past the end of the
  generated script is written as a ``fault: raise`` turn, the crash the scripted model's
  exhaustion is); a loop that calls the model more often fails on the missing turn, one
  that calls it less often on the turns left over;
- ``steering``: only the entries whose point a correct run reaches;
- ``raises``/``result``: exec raises ``ModelError``/``RunAbortedError`` exactly when the
  outer run ends on an ``error``/``aborted`` stop, else returns the last reply's text;
- ``model_calls``: every depth, under each run's cap ``max(1, min(50, max_iterations))``
  (50 when not given);
- ``requests``: each model call's depth, round, and the size and last entry of the history
  it is sent (results fed back, one per call, in call order);
- ``events`` (``ordered``): each reply, then one ``tool_execution_end`` and one toolResult
  ``message_end`` per call of every reply that is not an ``error``/``aborted`` stop, in
  call order with ids paired, skipped ones (``skipped: true`` and the seed's text) only
  after a steering point; each ``turn_end`` with its result count, steering and follow-up
  messages where they are delivered, nested runs inside their tool call, and every
  ``agent_end`` with the reason the rules give (stop, error, aborted or cap);
- ``counts``: how many events of each type.

What the rules cannot decide is left out, never filled in from the run: a scenario with
such a part (see :class:`~openprogram_sim.fuzz.UnpredictableScenario`) gets no file.

The file is written as a person writes YAML (:mod:`openprogram_sim.fuzz._regression`, which
the campaign over the user's tools writes its contract files with too).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from openprogram_sim.fuzz._regression import write_document
from openprogram_sim.fuzz.loop._predict import predict
from openprogram_sim.scenario import Scenario

__all__ = ["derive_expect", "regression_document", "write_regression"]

_COUNT_ORDER = (
    "agent_start",
    "turn_start",
    "message_start",
    "message_end",
    "tool_execution_start",
    "tool_execution_end",
    "turn_end",
    "agent_end",
)


def derive_expect(scenario: Scenario) -> dict[str, Any]:
    """The ``expect:`` a correct loop meets on ``scenario``, from the seed's rules alone
    (raises :class:`~openprogram_sim.fuzz.UnpredictableScenario` when they do not decide
    the run). It describes the run; :func:`regression_document` also trims the script to
    the turns played, so that the file passes as a whole."""
    p = predict(scenario)
    expect: dict[str, Any] = {"raises": {"type": p.raises} if p.raises else False}
    if p.result is not None:
        expect["result"] = p.result
    expect["model_calls"] = p.model_calls
    expect["requests"] = p.requests
    expect["events"] = p.events
    expect["counts"] = {k: p.counts[k] for k in _COUNT_ORDER}
    return expect


def _title(violation: str, limit: int = 72) -> str:
    text = re.sub(r"^#\d+ ", "", violation).split(" (")[0]
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " ..."


def regression_document(
    scenario: Scenario,
    violations: list[str],
    *,
    seed: int | None = None,
    properties: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The scenario file's content (a dict in the schema's key order): ``scenario`` with its
    script trimmed to the turns a correct loop plays, the steering entries it reaches, and
    :func:`derive_expect`; plus ``properties`` (``{properties: [...], trajectory: {...}}``,
    the user's rules the run broke) under ``expect:``."""
    prediction = predict(scenario)
    data = scenario.model_dump(exclude_defaults=True, exclude={"path", "expect"})
    data["scenario"] = f"fuzz regression: {_title(violations[0])}" if violations else "fuzz case"
    found = f" with seed {seed}" if seed is not None else ""
    data["description"] = (
        f"Found and shrunk by `openprogram-sim fuzz`{found}. Invariants violated:\n"
        + "\n".join(f"- {v}" for v in violations)
        + "\nThe expectations are the seed's rules applied to this script, not the failing "
        "run: a correct loop passes."
        + (
            " Your properties that the run broke are expected too (expect.properties / "
            "expect.trajectory, from fuzz --properties): the file passes once they hold."
            if properties
            else ""
        )
    )
    data["tags"] = ["regression", "fuzz"]
    data["model"] = prediction.script
    steering = [s for i, s in enumerate(data.get("steering", [])) if i in prediction.fired]
    data.pop("steering", None)
    if steering:
        data["steering"] = steering
    data["expect"] = {**derive_expect(Scenario.model_validate(data)), **(properties or {})}
    order = ["scenario", "description", "tags", "system_prompt", "tools", "toolsets", "exec"]
    order += ["model", "steering", "follow_ups", "expect"]
    return {k: data[k] for k in order if k in data}


def write_regression(
    directory: str | Path,
    scenario: Scenario,
    violations: list[str],
    *,
    seed: int | None = None,
    properties: dict[str, Any] | None = None,
) -> Path:
    """Write the regression file under ``directory`` (created if needed); returns its path.
    The name carries a digest of the content, so the same case is written once.
    ``properties``: the user's rules the run broke, as :func:`regression_document` takes."""
    document = regression_document(scenario, violations, seed=seed, properties=properties)
    return write_document(directory, document)
