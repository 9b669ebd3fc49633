"""The behaviour matrix and the tool code section in a real headless Chromium."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support import run_cli
from coverage_browser import chromium, errors, require_browser

from openprogram_sim.coverage import CATALOGUE

ROOT = Path(__file__).resolve().parents[2]
CLI = Path(sys.executable).parent / "openprogram-sim"


def _report(cwd: Path, *args: str) -> str:
    if "--coverage-source" in args:
        # a process of its own: in this one pytest-cov (CI's --cov) already owns the tracer,
        # and the CLI refuses to start a second measurement
        done = subprocess.run([str(CLI), "run", *args, "--report", "r.html"], cwd=cwd,
                              capture_output=True, text=True, timeout=300)  # fmt: skip
    else:
        done = run_cli("run", *args, "--report", "r.html", cwd=cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    return (cwd / "r.html").as_uri()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    require_browser()
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as driver:
        yield driver


@pytest.fixture(scope="module")
def library_report(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("library")
    shutil.copytree(ROOT / "scenarios", root / "scenarios")
    return _report(root, "scenarios")


def _scroll_click(driver: Any, element: Any) -> None:
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    element.click()


def test_the_table_and_the_matrix_link_behaviours_to_scenarios(
    browser: Any, library_report: str
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(library_report)
    summary = browser.find_element(By.CSS_SELECTOR, "#coverage > summary")
    assert f"{len(CATALOGUE)} of {len(CATALOGUE)} exercised (100%)" in summary.text
    _scroll_click(browser, summary)
    rows = browser.find_elements(By.CSS_SELECTOR, "table.behaviours tbody tr")
    assert [r.get_attribute("data-behaviour") for r in rows] == [b.id for b in CATALOGUE]
    assert browser.find_elements(By.CSS_SELECTOR, "table.matrix") == []  # drawn on opening

    _scroll_click(browser, browser.find_element(By.CSS_SELECTOR, "#matrix > summary"))
    WebDriverWait(browser, 10).until(  # the toggle event comes after the click returns
        lambda d: d.find_elements(By.CSS_SELECTOR, "table.matrix th.b")
    )
    heads = browser.find_elements(By.CSS_SELECTOR, "table.matrix th.b")
    assert [h.get_attribute("data-behaviour") for h in heads] == [b.id for b in CATALOGUE]
    lines = browser.find_elements(By.CSS_SELECTOR, "table.matrix tbody tr")
    tests = browser.find_elements(By.CSS_SELECTOR, "details.test")
    assert len(lines) == len(tests)
    index = next(
        t.get_attribute("data-i")
        for t in tests
        if t.get_attribute("data-id") == "scenarios/tool_choice/forced_function.yaml"
    )
    forced = browser.find_element(By.CSS_SELECTOR, f'table.matrix tr[data-row="{index}"]')
    auto = forced.find_element(By.CSS_SELECTOR, 'td[data-behaviour="tool_choice_auto"]')
    assert (auto.text, auto.get_attribute("class")) == ("", "")  # it sends a forced choice only
    cell = forced.find_element(By.CSS_SELECTOR, 'td[data-behaviour="tool_choice_forced"]')
    assert (cell.text, cell.get_attribute("class")) == ("●", "a")

    # a link in the table opens the scenario's row, and its timeline is drawn
    link = browser.find_element(By.CSS_SELECTOR, "#b-tool_choice_forced td.links a")
    _scroll_click(browser, link)
    target = browser.find_element(By.ID, link.get_attribute("data-goto"))
    assert target.get_attribute("open") == "true"
    assert target.get_attribute("data-id") == "scenarios/tool_choice/forced_function.yaml"
    WebDriverWait(browser, 10).until(
        lambda _: target.find_elements(By.CSS_SELECTOR, ".timeline .round-head")
    )

    # "+N more" marks every scenario exercising the behaviour in the matrix
    more = browser.find_element(By.CSS_SELECTOR, "#b-tool_choice_auto a[data-matrix]")
    _scroll_click(browser, more)
    marked = browser.find_elements(By.CSS_SELECTOR, "table.matrix tbody tr.sel")
    count = browser.find_element(By.CSS_SELECTOR, "#b-tool_choice_auto td.n").text
    assert len(marked) == int(count) > 8
    assert errors(browser) == []


def test_tool_code_lines_lead_to_the_scenarios_that_ran_them(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    project = tmp_path / "weather_agent"
    shutil.copytree(ROOT / "examples" / "weather_agent", project)
    browser.get(_report(project, "scenarios", "--coverage-source", "weather_agent"))
    _scroll_click(browser, browser.find_element(By.CSS_SELECTOR, "#tool-code > summary"))
    tool = browser.find_element(By.ID, "code-get_weather")
    _scroll_click(browser, tool.find_element(By.TAG_NAME, "summary"))
    assert "lines 4/4 (100%) · branches 2/2 (100%)" in tool.text
    raising = next(
        r for r in tool.find_elements(By.CSS_SELECTOR, "tr") if "no weather station" in r.text
    )
    assert raising.get_attribute("class") == "run"
    (link,) = raising.find_elements(By.CSS_SELECTOR, "td.ctx a")
    assert link.text == "unknown_city"
    assert link.get_attribute("title") == "scenarios/unknown_city.yaml"
    _scroll_click(browser, link)
    row = browser.find_element(By.ID, link.get_attribute("data-goto"))
    assert row.get_attribute("open") == "true"
    assert row.get_attribute("data-id") == "scenarios/unknown_city.yaml"
    convert = browser.find_element(By.ID, "code-convert")
    _scroll_click(browser, convert.find_element(By.TAG_NAME, "summary"))
    assert convert.find_elements(By.CSS_SELECTOR, "tr.missed")  # kelvin never ran
    assert errors(browser) == []
