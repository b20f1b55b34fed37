"""A headless Chromium from the distribution's packages, driven by Selenium through the
distribution's chromedriver (no browser downloaded at run time)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.needs import missing

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@contextmanager
def chromium() -> Iterator[Any]:
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing("selenium is not installed (fix: pip install selenium)")
    for path in (CHROMIUM, CHROMEDRIVER):
        if not shutil.which(path):
            missing(f"{path} is missing (fix: .ci/chromium_setup.sh, or apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,1100",
        "--no-first-run",
        "--disable-extensions",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = _start(webdriver, Service, options)
    try:
        yield driver
    finally:
        driver.quit()


def _start(webdriver: Any, service: Any, options: Any, tries: int = 3) -> Any:
    """chromedriver on a port Selenium picked free a moment before: on a busy machine
    another process can take it first (chromedriver then exits 1), so try again."""
    from selenium.common.exceptions import WebDriverException

    for attempt in range(1, tries + 1):
        try:
            return webdriver.Chrome(service=service(CHROMEDRIVER), options=options)
        except WebDriverException:
            if attempt == tries:
                raise
            time.sleep(1)
    raise AssertionError("unreachable")


def console_errors(driver: Any) -> list[dict[str, Any]]:
    """The console's errors since the last call (reading the log empties it)."""
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
