"""Headless Chromium for the browser tests: Debian's ``/usr/bin/chromium`` driven by Playwright.

Playwright never downloads a browser here: it is pointed at ``/usr/bin/chromium`` (``make test`` installs
it). Without Chromium the browser tests skip, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update"]


@contextmanager
def chromium() -> Iterator[Any]:
    """A launched headless Chromium (a Playwright ``Browser``), closed at the end."""
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} is missing: make test installs it (apt-get install chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()
