"""A headless Chromium for the browser tests: Debian's chromium driven by Selenium and chromium-driver.

The flags keep Chromium from reaching out on its own (updates, sync, field
trials), which a closed network would answer with long timeouts, and each
driver gets a fresh profile directory.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = os.environ.get("TASKQUEUE_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("TASKQUEUE_CHROMEDRIVER", "/usr/bin/chromedriver")
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
    "--window-size=1360,900",
)


def missing() -> str | None:
    """Why no browser test can run here, or None when Chromium and its driver are installed."""
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not (Path(path).is_file() and os.access(path, os.X_OK)):
            return f"{path} not found: apt-get install -y chromium chromium-driver (package {package})"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed: pip install -e '.[dev]'"
    return None


@contextmanager
def chromium() -> Iterator[object]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="taskqueue-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
