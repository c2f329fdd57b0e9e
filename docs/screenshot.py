"""The README's picture of the demo's report: ``python docs/screenshot.py
ltr-demo/report.html docs/report.png [WORDS]`` opens the report in Debian's headless
Chromium (chromium + chromium-driver, driven by selenium), finds the query with WORDS
(default: the largest win) and saves a screenshot."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By


def main(report: str, png: str, words: str | None = None) -> None:
    os.environ.setdefault("SE_OFFLINE", "true")
    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--window-size=1400,1300"):
        opts.add_argument(arg)
    browser = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)
    try:
        browser.get(Path(report).resolve().as_uri())
        if words:
            browser.find_element(By.ID, "search").send_keys(words)
        rows = browser.find_elements(By.CSS_SELECTOR, "#queries tbody tr")
        rows[0].click()
        browser.save_screenshot(png)
    finally:
        browser.quit()


if __name__ == "__main__":
    main(*sys.argv[1:4])
