"""The eval view in a real browser (headless Chromium, as in ``test_browser.py``): written by
a pytest session run as an eval against a served stochastic scenario whose texts carry a
payload; a failing sample's timeline opens and shows, its cassette's path is on the row,
nothing from the run executes, and the page logs no error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_browser import _errors, browser  # noqa: F401  (the fixture)

from openprogram_sim.play import serve_scenario

KEY = "sk-" + "placeholder-browser-" + "0123456789" + "abcdefghijklmnop"  # no key-shaped literal
PAYLOAD = "<img src=x onerror=window.pwned=1><script>window.pwned=2</script>"

# Looks the order up (passes) or answers from memory with a payload (fails), as drawn per
# served session from the seed.
SCENARIO = f"""\
scenario: "the order is looked up {PAYLOAD}"
seed: 7
tools:
  lookup_order:
    parameters: {{type: object, properties: {{order_id: {{type: string}}}}, required: [order_id]}}
    returns: "order 42: shipped {PAYLOAD}"
exec:
  content: "Where is order 42?"
  tools: [lookup_order]
model:
  - one_of:
      - weight: 0.6
        tool_calls: [{{lookup_order: {{order_id: "42"}}}}]
      - weight: 0.4
        text: "It is probably on its way {PAYLOAD}"
  - text: "Order 42 has shipped."
expect:
  trajectory:
    mode: exact
    calls:
      - lookup_order: {{order_id: "42"}}
"""


@pytest.fixture
def eval_page(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("CI", "")  # the eval records its samples
    path = pytester.path / "scenarios" / "order.yaml"
    path.parent.mkdir()
    path.write_text(SCENARIO, encoding="utf-8")
    with serve_scenario(path) as server:
        result = pytester.runpytest(
            "-p", "no:cacheprovider", "--openprogram-eval", "openai:gpt-4o-mini",
            "--openprogram-base-url", server.url + "/s/{sample}/v1", "--openprogram-samples",
            "8", "--openprogram-report", "eval.html",
        )  # fmt: skip
    result.assert_outcomes(failed=1)
    yield pytester.path / "eval.html"


def _row_state(driver: Any, row: Any) -> dict[str, Any]:
    return dict(
        driver.execute_script(
            "var row = arguments[0]; var t = row.querySelector('.timeline');"
            "return {open: row.open, rounds: row.querySelectorAll('.timeline .round-head').length,"
            " shown: !!t && t.getBoundingClientRect().height > 0,"
            " text: t ? t.textContent : '',"
            " cassette: row.querySelector('[data-cassette]').textContent,"
            " status: row.dataset.status, sample: row.dataset.sample}",
            row,
        )
    )


@pytest.mark.slow
def test_a_failing_samples_timeline_opens_with_its_cassette(
    browser: Any,  # noqa: F811
    eval_page: Path,
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(eval_page.as_uri())
    heading = browser.find_element(By.CSS_SELECTOR, "section.scenario h2 .title")
    assert heading.text == f"the order is looked up {PAYLOAD}"  # the title as text
    rows = browser.find_elements(By.CSS_SELECTOR, "section.scenario details.test")
    assert len(rows) == 8
    statuses = [r.get_attribute("data-status") for r in rows]
    failing = statuses.count("failed")
    assert 0 < failing < 8 and statuses == ["failed"] * failing + ["passed"] * (8 - failing)
    first = rows[0]
    assert not _row_state(browser, first)["open"]
    summary = first.find_element(By.TAG_NAME, "summary")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", summary)
    summary.click()
    WebDriverWait(browser, 10).until(lambda _: _row_state(browser, first)["rounds"] > 0)
    state = _row_state(browser, first)
    assert state["open"] and state["shown"]
    # the failing sample answered from memory: one round, the payload as text
    assert state["rounds"] == 1
    assert f"It is probably on its way {PAYLOAD}" in state["text"]
    cassette = Path(state["cassette"])
    assert cassette.name == f"sample-{int(state['sample']):03d}.yaml"
    assert (eval_page.parent / cassette).is_file()
    assert first.find_element(By.CSS_SELECTOR, "pre.failure").is_displayed()
    assert "trajectory (exact) did not match" in first.text
    # a passing sample's timeline shows the lookup and its result
    last = rows[-1]
    browser.execute_script("arguments[0].open = true", last)
    WebDriverWait(browser, 10).until(lambda _: _row_state(browser, last)["rounds"] > 0)
    text = _row_state(browser, last)["text"]
    assert 'lookup_order(order_id="42")' in text and f"order 42: shipped {PAYLOAD}" in text
    # "open failures" opens every failing row, none of the passing ones
    browser.find_element(By.ID, "open-failures").click()
    opened = [_row_state(browser, r)["open"] for r in rows[:-1]]
    assert opened == [True] * failing + [False] * (7 - failing)
    assert browser.execute_script("return window.pwned === undefined")
    assert _errors(browser) == []
    assert KEY not in browser.page_source
