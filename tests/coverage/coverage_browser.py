"""Headless Chromium for the coverage report tests and the docs screenshot (the same
Debian chromium and chromedriver tests/plugin/test_browser.py drives)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--hide-scrollbars")  # fmt: skip


def missing() -> str | None:
    """Why the browser cannot start here (None: it can)."""
    lacking = [n for n in ("chromium", "chromedriver") if not shutil.which(n)]
    try:
        import selenium  # noqa: F401
    except ImportError:
        lacking.append("the selenium package")
    return f"needs {', '.join(lacking)}" if lacking else None


def require_browser() -> None:
    """Skip the test without a browser, but fail in CI, where .ci/run installs it."""
    reason = missing()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"headless browser test {reason}; in CI the browser must be there")
        pytest.skip(f"headless browser test {reason} (apt-get install chromium chromium-driver)")


@contextmanager
def chromium(profile: Path, width: int = 1280, height: int = 1000) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(shutil.which("chromium"))
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--window-size={width},{height}")
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(str(shutil.which("chromedriver"))))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def errors(driver: Any) -> list[dict[str, Any]]:
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
