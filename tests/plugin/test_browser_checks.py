"""The report's trajectory and property section in a real browser (headless Chromium, as in
``test_browser.py``): it renders on a row, its ``#N`` leads to the timeline, and a
``<script>`` or ``<img onerror>`` payload in a rule's tool name, a call's name or its
arguments stays text and never runs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from test_browser import _click, _errors, _open, browser  # noqa: F401  (the fixture)

from openprogram_sim.cli import main as cli_main

HOSTILE = """\
scenario: a hostile tool name <script>window.pwned = 4</script>
tools:
  search: {returns: "3 results"}
exec: {content: "Find.", tools: [search]}
model:
  - tool_calls: [{search: {q: "<script>window.pwned = 2</script>"}}]
  - tool_calls: [{name: "<img src=x onerror=window.pwned=1>", arguments: {}}]
  - text: done
expect:
  trajectory: {mode: in_order, calls: [search]}
  properties:
    - at_most: {tool: "<img src=x onerror=window.pwned=1>", times: 0}
    - never: {tool: {$regex: "^<script>window.pwned = 3</script>$"}}
"""

TYPO = """\
scenario: a rule names a tool that is not there
tools:
  search: {returns: "3 results"}
exec: {content: "Find.", tools: [search]}
model: [{text: done}]
expect:
  properties: [{never: "<script>window.pwned = 5</script>"}]
"""


@pytest.fixture(scope="module")
def checks_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("browser-checks")
    (root / "scenarios").mkdir()
    (root / "scenarios" / "hostile.yaml").write_text(HOSTILE)
    (root / "scenarios" / "typo.yaml").write_text(TYPO)
    cwd = Path.cwd()
    os.chdir(root)
    try:
        assert cli_main(["run", "scenarios", "--report", "report.html"]) == 2
    finally:
        os.chdir(cwd)
    return (root / "report.html").as_uri()


@pytest.mark.slow
def test_the_checks_render_link_to_the_timeline_and_run_no_payload(
    browser: Any,  # noqa: F811
    checks_url: str,
) -> None:
    from selenium.webdriver.common.by import By

    browser.get(checks_url)
    row = _open(browser, "scenarios/hostile.yaml")
    table = row.find_element(By.CSS_SELECTOR, "table.checks")
    lines = [tr.text for tr in table.find_elements(By.CSS_SELECTOR, "tbody tr")]
    assert lines == [
        "trajectory in_order PASS scenarios/hostile.yaml:10 score 1.00 (recall), min_score 1.0 · "
        "precision 1/2 = 0.50 · recall 1/1 = 1.00 · F1 0.67",
        'property 1 at_most: {"tool": "<img src=x onerror=window.pwned=1>", "times": 0} BROKEN '
        "scenarios/hostile.yaml:12 #14\n<img src=x onerror=window.pwned=1> was called 1 times, "
        "at most 0 allowed: #14 (beyond the limit: #14)",
        'property 2 never: {"tool": {"$regex": "^<script>window.pwned = 3</script>$"}} HELD '
        "scenarios/hostile.yaml:13",
    ]
    # the #N of the broken rule leads to its call on the timeline
    link = table.find_element(By.CSS_SELECTOR, "tr.property.broken a.at-link")
    _click(browser, link)
    (hit,) = row.find_elements(By.CSS_SELECTOR, ".timeline .hit")
    assert hit.find_element(By.CSS_SELECTOR, ".call").text == "<img src=x onerror=window.pwned=1>()"
    assert 'search(q="<script>window.pwned = 2</script>")' in row.text

    invalid = _open(browser, "scenarios/typo.yaml")
    assert (
        "(expect.properties[0].never) property 1 (never) names tool "
        "'<script>window.pwned = 5</script>', which is not defined; define it under `tools:`"
        in invalid.find_element(By.CSS_SELECTOR, "pre.failure").text
    )
    # nothing of the data became markup, and no payload ran
    assert browser.execute_script("return window.pwned === undefined")
    assert (
        browser.find_elements(By.CSS_SELECTOR, "main img, main script, table.checks b ~ img") == []
    )
    scripts = browser.execute_script(
        "return Array.from(document.scripts).map(function (s) { return s.id || s.type || 'code'; })"
    )
    assert scripts == ["op-matrix", "op-data", "code"]  # the page's own, none from the data
    assert _errors(browser) == []
