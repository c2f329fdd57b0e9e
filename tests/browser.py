"""Debian's Chromium, headless, through selenium (for the HTML report's tests)."""

from __future__ import annotations

import os
import shutil

import pytest


def chromium():
    """A headless Chromium driver; skips (fails under CI) when chromedriver is missing."""
    driver = shutil.which("chromedriver")
    if not driver:
        if os.environ.get("CI"):
            pytest.fail("chromedriver (Debian's chromium-driver) is missing: .ci/run installs it")
        pytest.skip("Debian's chromium and chromium-driver are not installed (apt-get install "
                    "chromium chromium-driver)")
    os.environ.setdefault("SE_OFFLINE", "true")          # never let selenium download a driver
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver), options=opts)
