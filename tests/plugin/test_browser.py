"""The report in a real browser: headless Chromium (Debian's, via chromedriver) opens a
generated report, finds every scenario, expands timelines, filters, and logs no error.

In CI (CI set) a missing browser fails this test; locally it is skipped with the reason.
`.ci/run` installs `chromium` and `chromium-driver`.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from plugin_data import TITLES, bulk_record, write_scenarios

from openprogram_sim.cli import main as cli_main

DASH = "\u2013"  # an en dash, between the first and last number of an item

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,1000",
)


def _browser_paths() -> tuple[str, str]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver") or (
        "/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists() else None
    )
    missing = [
        name for name, found in (("chromium", chromium), ("chromedriver", driver)) if not found
    ]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("the selenium package (pip install -e '.[test]')")
    if missing:
        reason = (
            f"headless browser test needs {', '.join(missing)} "
            "(apt-get install chromium chromium-driver)"
        )
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; in CI the browser must be there (.ci/run installs it)")
        pytest.skip(reason)
    assert chromium and driver
    return chromium, driver


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    chromium, driver_path = _browser_paths()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def report_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("browser-report")
    write_scenarios(root)
    cwd = Path.cwd()
    os.chdir(root)
    try:
        cli_main(["run", "scenarios", "--report", "report.html"])
    finally:
        os.chdir(cwd)
    return (root / "report.html").as_uri()


def _errors(driver: Any) -> list[dict[str, Any]]:
    return [entry for entry in driver.get_log("browser") if entry["level"] in ("SEVERE", "ERROR")]


def _click(driver: Any, element: Any) -> None:
    """Click in the middle of the window, clear of the sticky filter bar."""
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    element.click()


def _open(driver: Any, test_id: str) -> Any:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    row = driver.execute_script(
        "var id = arguments[0]; return Array.from(document.querySelectorAll('details.test'))"
        ".find(function (r) { return r.dataset.id === id; })",
        test_id,
    )
    assert row is not None, f"no row {test_id!r}"
    summary = row.find_element(By.TAG_NAME, "summary")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", summary)
    summary.click()
    WebDriverWait(driver, 10).until(
        lambda _: (
            row.find_elements(By.CSS_SELECTOR, ".timeline .round-head")
            or not row.find_elements(By.CSS_SELECTOR, ".timeline")
        )
    )
    return row


def test_every_scenario_is_listed_and_timelines_expand(browser: Any, report_url: str) -> None:
    from selenium.webdriver.common.by import By

    browser.get(report_url)
    rows = browser.find_elements(By.CSS_SELECTOR, "details.test")
    assert {r.get_attribute("data-id") for r in rows} == set(TITLES) | {"scenarios/bad/typo.yaml"}
    assert browser.execute_script("return typeof window.openprogramReport") == "object"
    # nothing is built until a row is opened
    assert browser.find_elements(By.CSS_SELECTOR, ".body, .timeline") == []

    nested = _open(browser, "scenarios/nested/research.yaml")
    text = nested.find_element(By.CSS_SELECTOR, ".timeline").text
    for shown in (
        "round 1/2",
        "round 2/2",
        'research(topic="tides")',
        "nested exec · depth 1 · 2 rounds",
        'search(q="tides")',
        "→ <b>bold</b> & </script>",
        "picks research",
    ):
        assert shown in text, (shown, text)
    nested_box = nested.find_element(By.CSS_SELECTOR, ".tool-box .exec.nested")
    assert "look into tides" in nested_box.text  # indented under its tool call
    assert nested.find_elements(By.CSS_SELECTOR, ".timeline b") == []  # data stayed text

    broken = _open(browser, "scenarios/steering/broken.yaml")
    text = broken.text
    assert "skipped: Skipped due to queued user message." in text
    skipped = broken.find_elements(By.CSS_SELECTOR, ".ev.tool.skipped .call")
    assert [row.text for row in skipped] == ['search(q="b")', 'search(q="c")']
    assert "steering" in text and "Stop, do X instead." in text
    assert "<- differs" in broken.find_element(By.CSS_SELECTOR, "pre.failure").text

    cap = _open(browser, "scenarios/cap/polling.yaml")
    assert "✗ error: " in cap.text and "disk full" in cap.text
    assert "round cap hit after 2 rounds" in cap.text

    follow = _open(browser, "scenarios/follow_ups/another_pass.yaml")
    assert "follow-up" in follow.text and "Also check Y." in follow.text

    one_pick = _open(browser, "scenarios/basics/one_pick.yaml")
    assert "usage input 12 · output 3" in one_pick.text

    assert _errors(browser) == []


def test_a_diffs_numbers_are_on_the_timeline_and_lead_to_it(browser: Any, report_url: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(report_url)
    rows = browser.find_elements(By.CSS_SELECTOR, "details.test")
    assert [r.get_attribute("data-status") for r in rows] == ["failed", "error"] + ["passed"] * 4
    broken = _open(browser, "scenarios/steering/broken.yaml")
    failure = broken.find_element(By.CSS_SELECTOR, "pre.failure")
    diff = failure.text
    found = re.search(r"closest actual tool_execution_end: #(\d+)", diff)
    assert found is not None, diff
    named = int(found.group(1))
    assert re.search(rf"#{named} +tool_execution_end +d0 r1 search\(\{{\"q\": \"b\"\}}\)", diff)

    # the item built from that entry: the skipped call of q="b", from its start to its end
    (item,) = [
        node
        for node in broken.find_elements(By.CSS_SELECTOR, ".timeline [data-at]")
        if str(named) in node.get_attribute("data-at").split()
    ]
    assert item.find_element(By.CSS_SELECTOR, ".call").text == 'search(q="b")'
    assert item.find_element(By.CSS_SELECTOR, ".at").text == f"#{named - 1}{DASH}{named}"
    assert "skipped" in item.get_attribute("class").split()
    for ev in broken.find_elements(By.CSS_SELECTOR, ".timeline .ev.user, .ev.model, .ev.tool"):
        assert re.fullmatch(rf"#\d+({DASH}\d+)?", ev.find_element(By.CSS_SELECTOR, ".at").text)

    # the raw view numbers its lines the same way
    raw = broken.find_element(By.CSS_SELECTOR, "details.raw")
    _click(browser, raw.find_element(By.TAG_NAME, "summary"))
    line = WebDriverWait(browser, 10).until(
        lambda _: raw.find_element(By.CSS_SELECTOR, f'.line[data-at="{named}"]')
    )
    assert line.text.startswith(f'#{named} tool_execution_end d0 r1 search(q="b") -> error: ')
    result = raw.find_element(By.CSS_SELECTOR, '.line[data-at="9"]')
    assert re.search(r"#9 +message_end +d0 r1 toolResult", diff)
    assert result.text == '#9 message_end d0 r1 toolResult "3 results"'
    assert "numbered as recorded" in raw.find_element(By.TAG_NAME, "summary").text

    # each #N of the diff is a link to its item; the text reads as before
    assert failure.text == diff
    links = failure.find_elements(By.CSS_SELECTOR, "a.at-link")
    assert [a.text for a in links][-1] == f"#{named}"  # the closest actual
    _click(browser, links[-1])
    assert broken.find_elements(By.CSS_SELECTOR, ".timeline .hit") == [item]
    assert "hit" in line.get_attribute("class").split()
    # the trace shown starts at the previous match, #7; #8 is a message_start, which the
    # report leaves out: its link leads to the call before it (q="a")
    assert re.search(
        r"\(expected after #7\):\n +#7 +tool_execution_end .*\n +#8 +message_start", diff
    )
    _click(browser, next(a for a in links if a.text == "#8"))
    (hit,) = broken.find_elements(By.CSS_SELECTOR, ".timeline .hit")
    assert hit.find_element(By.CSS_SELECTOR, ".call").text == 'search(q="a")'
    assert _errors(browser) == []


def test_a_nested_diff_reads_in_the_report_as_the_cli_prints_it(
    browser: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from selenium.webdriver.common.by import By

    root = Path(__file__).resolve().parents[2]
    scenario = tmp_path / "notes_broken.yaml"
    scenario.write_text((root / "tests/sim/data/notes_broken.yaml").read_text())
    report = tmp_path / "report.html"
    assert cli_main(["run", str(scenario), "--report", str(report)]) == 1
    printed = capsys.readouterr().out.replace(f"{tmp_path}/", "")
    cli_text = printed[printed.index("- events") : printed.index("\n\n", printed.index("- events"))]
    browser.get(report.as_uri())
    row = _open(
        browser, browser.find_element(By.CSS_SELECTOR, "details.test").get_attribute("data-id")
    )
    failure = row.find_element(By.CSS_SELECTOR, "pre.failure")
    shown = failure.text.replace(f"{tmp_path}/", "")
    assert shown == cli_text
    for line in (
        'args.body      "buy stamps"  "buy stamps at the post office"  <- differs',
        'args.priority  "normal"      (absent)                         <- differs',
        "hint: the actual args also has tags, which the expected mapping does not name (a mapping",
        "hint: the call has no args.priority (add_note's schema defaults it to",
    ):
        assert line in shown, (line, shown)
    # the closest event's number leads to its call on the timeline
    link = next(a for a in failure.find_elements(By.CSS_SELECTOR, "a.at-link") if a.text == "#6")
    _click(browser, link)
    (hit,) = row.find_elements(By.CSS_SELECTOR, ".timeline .hit")
    assert hit.find_element(By.CSS_SELECTOR, ".call").text.startswith("add_note(")
    assert _errors(browser) == []


def test_filters_and_search(browser: Any, report_url: str) -> None:
    from selenium.webdriver.common.by import By

    browser.get(report_url)

    def visible() -> set[str]:
        return {
            r.get_attribute("data-id")
            for r in browser.find_elements(By.CSS_SELECTOR, "details.test")
            if r.is_displayed()
        }

    assert len(visible()) == 6
    browser.find_element(By.CSS_SELECTOR, "input[name=status][value=passed]").click()
    assert visible() == {"scenarios/steering/broken.yaml", "scenarios/bad/typo.yaml"}
    assert browser.find_element(By.ID, "shown").text == "2 of 6 shown"
    browser.find_element(By.CSS_SELECTOR, "input[name=status][value=passed]").click()
    browser.find_element(By.ID, "search").send_keys("polling")
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 5).until(lambda _: len(visible()) == 1)
    assert visible() == {"scenarios/cap/polling.yaml"}
    browser.find_element(By.ID, "search").clear()
    browser.execute_script("document.getElementById('search').dispatchEvent(new Event('input'))")
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element(By.ID, "tag")).select_by_value("nested")
    assert visible() == {"scenarios/nested/research.yaml"}
    assert _errors(browser) == []


def test_a_big_report_opens_fast(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    from openprogram_sim.report import write_report

    path = write_report(tmp_path / "big.html", [bulk_record(i) for i in range(3000)])
    browser.get(path.as_uri())
    loaded_ms = browser.execute_script(
        "var t = performance.getEntriesByType('navigation')[0]; return t.loadEventEnd;"
    )
    assert browser.execute_script("return document.querySelectorAll('details.test').length") == 3000
    print(f"3000 rows: load event at {loaded_ms:.0f} ms")
    assert loaded_ms < 10000, loaded_ms
    row = _open(browser, "tests/test_x.py::test_02999")
    assert "search(q=2999)" in row.text
    assert "(300 chars, 1 line)" in row.text  # a long result is collapsed
    assert browser.find_elements(By.CSS_SELECTOR, ".timeline .round") != []
    assert _errors(browser) == []
