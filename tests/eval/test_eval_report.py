"""The HTML report's eval view, from an eval run over loopback against a served stochastic
scenario: per scenario its figures, samples failures first with their cassettes and
timelines (each replayed from its cassette), written atomically, hostile text escaped.

The helpers here (a served eval in-process, the page parsed) serve the JUnit and browser
tests too."""

from __future__ import annotations

import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from unittest import mock

from openprogram_sim.eval import (
    EvalOptions,
    ScenarioResult,
    eval_records,
    evaluate,
    wilson,
    write_eval_report,
)
from openprogram_sim.play import serve_scenario
from openprogram_sim.scenario import Scenario, load_scenario

ROOT = Path(__file__).resolve().parents[2]
WEIGHTED = ROOT / "scenarios" / "stochastic" / "weighted_pick.yaml"
KEY = "sk-" + "placeholder-report-" + "0123456789" + "abcdefghijklmnop"  # no key-shaped literal
HOSTILE = "</script><script>window.pwned = 1</script><!-- \u2028 <img src=x onerror=window.pwned=2>"

HOSTILE_SCENARIO = f"""\
scenario: "a hostile title {HOSTILE}"
seed: 7
tools:
  lookup_order:
    parameters: {{type: object, properties: {{order_id: {{type: string}}}}, required: [order_id]}}
    returns: "shipped {HOSTILE}"
exec:
  content: "Where is order 42? {HOSTILE}"
  tools: [lookup_order]
model:
  - one_of:
      - weight: 0.5
        tool_calls: [{{lookup_order: {{order_id: "42 {HOSTILE}"}}}}]
      - weight: 0.5
        text: "a reply {HOSTILE}"
  - text: "done {HOSTILE}"
expect:
  result: "done {HOSTILE}"
"""


def sample_eval(
    scenario: Path | str, out: Path, samples: int, *, threshold: float | None = None
) -> tuple[ScenarioResult, Scenario]:
    """``scenario`` served and evaluated against itself, ``samples`` at most (shown as its
    path relative to the repository when under it)."""
    path = Path(scenario)
    shown = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
    loaded = load_scenario(path, shown_as=shown)
    with (
        mock.patch.dict(os.environ, {"CI": "", "OPENAI_API_KEY": KEY}),
        serve_scenario(path) as server,
    ):
        options = EvalOptions(
            model="openai:gpt-4o-mini",
            samples=samples,
            base_url=server.url + "/s/{sample}/v1",
            threshold=threshold,
            out=out,
        )
        return evaluate(loaded, options), loaded


class Page(HTMLParser):
    """The eval page's scenario sections and sample rows, in page order, and its
    ``<script>`` elements."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[dict[str, str | None]] = []
        self.rows: list[dict[str, Any]] = []
        self.scripts: list[dict[str, str | None]] = []
        self.figures: dict[str, str] = {}
        self._figure: str | None = None
        self._cassette = False
        self._text: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "section" and "data-verdict" in a:
            self.sections.append(a)
        elif tag == "details" and a.get("data-kind") == "sample":
            self.rows.append({**a, "cassette": None})
        elif tag == "script":
            self.scripts.append(a)
        if "data-figure" in a:
            self._figure, self._text = a["data-figure"], []
        if "data-cassette" in a:
            self._cassette, self._text = True, []

    def handle_data(self, data: str) -> None:
        if self._figure is not None or self._cassette:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if self._figure is not None and tag in ("dd", "b"):
            key = f"{len(self.sections) - 1}.{self._figure}"
            self.figures.setdefault(key, "".join(self._text).strip())
            self._figure = None
        if self._cassette and tag == "code":
            self.rows[-1]["cassette"] = "".join(self._text)
            self._cassette = False


def _blob(html: str) -> list[dict]:
    match = re.search(r'<script type="application/json" id="op-data">(.*?)</script>', html, re.S)
    assert match is not None
    return json.loads(match.group(1))


def test_the_eval_view_shows_the_figures_and_each_sample_failures_first(tmp_path: Path) -> None:
    result, scenario = sample_eval(WEIGHTED, tmp_path / "eval", 10)
    assert (result.passed, result.n) == (7, 10)  # seeded: the served draws follow the names
    page_path = write_eval_report(
        [result], tmp_path / "out" / "eval.html", model="openai:gpt-4o-mini",
        scenarios={result.path: scenario},
    )  # fmt: skip
    html = page_path.read_text(encoding="utf-8")
    page = Page(html)
    assert [s["data-path"] for s in page.sections] == ["scenarios/stochastic/weighted_pick.yaml"]
    assert page.sections[0]["data-verdict"] == "fail"
    low, high = wilson(7, 10, 0.95).low, wilson(7, 10, 0.95).high
    assert page.figures["0.rate"] == "0.700"
    assert page.figures["0.interval"] == f"[{low:.3f}, {high:.3f}] (Wilson)"
    assert page.figures["0.verdict"] == "fail: every sample must pass (no threshold)"
    assert page.figures["0.stopping"] == "10 of 10 samples"
    assert "pass@1 0.700" in " ".join(page.figures["0.pass_at_k"].split())
    assert "data-flaky" in html and 'data-expectation="trajectory"' in html
    assert re.search(r"<code>trajectory</code></td><td class=\"n\">7/10</td>", html)
    # failures first, then the passing samples, each in sample order
    failing = [s.index for s in result.samples if not s.passed]
    assert len(failing) == 3
    shown = [(r["data-status"], int(r["data-sample"])) for r in page.rows]
    assert shown == [("failed", i) for i in failing] + [
        ("passed", s.index) for s in result.samples if s.passed
    ]
    # every row names its cassette, which is there, and its timeline replays it
    by_index = {s.index: s for s in result.samples}
    blob = _blob(html)
    for row, detail in zip(page.rows, blob, strict=True):
        sample = by_index[int(row["data-sample"])]
        assert row["cassette"] == sample.cassette and Path(sample.cassette).is_file()
        (run,) = detail["runs"]
        calls = [e["tool_name"] for e in run["trace"] if e["type"] == "tool_execution_start"]
        assert calls == [c["name"] for c in sample.calls]
        assert run["timeline"]["rounds"], detail["id"]
        assert run["trace"][-1] == {**run["trace"][-1], "type": "agent_end", "reason": "stop"}
    # a failing sample's failure is on the page, where the row opens
    assert "trajectory (exact) did not match" in html
    assert "regression <code>" in html and result.regressions[0].path in html
    assert KEY not in html


def test_the_page_is_written_atomically_and_rendered_from_views_too(tmp_path: Path) -> None:
    result, scenario = sample_eval(WEIGHTED, tmp_path / "eval", 4)
    target = tmp_path / "eval.html"
    target.write_text("an old report")
    write_eval_report([result], target, scenarios={result.path: scenario})
    first = target.read_text(encoding="utf-8")
    assert first.startswith("<!doctype html>") and first.rstrip().endswith("</html>")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".eval.html")] == []
    # the views (as an xdist worker ships them) render the same page, with the scenario
    # loaded from its path when it is not given
    views = json.loads(json.dumps(eval_records([result])))
    write_eval_report(views, target)
    again = target.read_text(encoding="utf-8")
    strip = re.compile(r"generated [^<]*")
    assert strip.sub("", again) == strip.sub("", first)


def test_a_sample_without_its_cassette_says_so(tmp_path: Path) -> None:
    result, _ = sample_eval(WEIGHTED, tmp_path / "eval", 2)
    gone = result.samples[0].cassette
    Path(gone).unlink()
    html = write_eval_report([result], tmp_path / "e.html").read_text(encoding="utf-8")
    assert f"no timeline: the cassette {gone} is not there any more" in html
    rows = _blob(html)
    assert [bool(d["runs"]) for d in rows] == [False, True]
    # a scenario that cannot be loaded (moved since) keeps its figures, without timelines
    result.path = str(tmp_path / "moved.yaml")
    html = write_eval_report([result], tmp_path / "e.html").read_text(encoding="utf-8")
    assert f"no timeline: the scenario {result.path} could not be loaded" in html
    assert Page(html).figures["0.rate"] == f"{result.rate:.3f}"


def test_a_replay_that_does_not_follow_the_sample_says_so(tmp_path: Path) -> None:
    result, scenario = sample_eval(WEIGHTED, tmp_path / "eval", 3)
    assert [bool(s.calls) for s in result.samples] == [True, True, True]
    # the tool returns something else now: the recorded second request no longer matches
    changed = tmp_path / "changed.yaml"
    changed.write_text(WEIGHTED.read_text().replace('"order 42: shipped"', '"order 42: lost"'))
    edited = load_scenario(changed, shown_as=result.path)
    html = write_eval_report(
        [result], tmp_path / "e.html", scenarios={result.path: edited}
    ).read_text(encoding="utf-8")
    notes = re.findall(r'<p class="note">([^<]*)</p>', html)
    assert len(notes) == 3
    assert all(
        n.startswith("this timeline is the cassette replayed, and it ended otherwise than the "
                     "sample (a tool whose result changed since?): the replay raised ")
        for n in notes
    ), notes  # fmt: skip
    # replayed through the scenario it was sampled from, no note
    html = write_eval_report(
        [result], tmp_path / "e.html", scenarios={result.path: scenario}
    ).read_text(encoding="utf-8")
    assert '<p class="note">' not in html


def test_hostile_text_from_the_scenario_and_the_model_stays_text(tmp_path: Path) -> None:
    path = tmp_path / "hostile.yaml"
    path.write_text(HOSTILE_SCENARIO, encoding="utf-8")
    result, scenario = sample_eval(path, tmp_path / "eval", 6)
    assert 0 < result.passed < result.n, "the draws give both kinds of sample"
    html = write_eval_report(
        [result], tmp_path / "e.html", title=f"eval {HOSTILE}", scenarios={result.path: scenario}
    ).read_text(encoding="utf-8")
    page = Page(html)
    # one data element and one program: nothing from the data opened or closed one
    assert page.scripts == [{"type": "application/json", "id": "op-data"}, {}]
    assert "<img" not in html and "window.pwned = 1</script>" not in html
    assert "\u2028" not in html.split('id="op-data">')[1].split("</script>")[0]
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in html  # title, failure texts
    texts = json.dumps(_blob(html), ensure_ascii=False)  # the run's own text, intact in it
    assert "</script><script>window.pwned = 1</script><!--" in texts
    assert "<img src=x onerror=window.pwned=2>" in texts
