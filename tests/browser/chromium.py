"""A headless Chromium driven by selenium, for tests of the HTML hpctwin writes.

`headless_chromium()` yields a selenium WebDriver of Debian's ``chromium`` through its
``chromedriver`` (``apt-get install chromium chromium-driver``; ``.ci/run`` installs both), with the
browser's console log kept (``driver.get_log("browser")``, see `severe`) and its network log (see
`external_requests`). When either binary or the selenium
package is missing, `missing()` says which, so a test can skip with that reason. Nothing is fetched:
selenium is given the driver's path, so its driver manager never runs, and the browser is started
with background networking, component updates and sync off (the pages under test are local files).
WebGL runs on SwiftShader (software), as on a machine without a GPU.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

CHROMIUM = os.environ.get("HPCTWIN_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("HPCTWIN_CHROMEDRIVER", "/usr/bin/chromedriver")

FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--disable-dev-shm-usage",
         "--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--window-size=1400,1200")


def missing() -> str | None:
    """Why a headless browser test cannot run here (None when it can)."""
    for path, pkg in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            return f"{path} not found (apt-get install {pkg}; .ci/run installs it when run as root)"
    try:
        import selenium  # noqa: F401, PLC0415
    except ImportError:
        return "the selenium package is not installed (pip install -e '.[test]')"
    return None


@contextmanager
def headless_chromium(page_load_timeout_s: float = 60.0) -> Iterator:
    """A selenium WebDriver of headless Chromium with the console log kept; quit on exit."""
    from selenium import webdriver  # noqa: PLC0415
    from selenium.webdriver.chrome.service import Service  # noqa: PLC0415
    profile = tempfile.mkdtemp(prefix="hpctwin-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for f in FLAGS:
        opts.add_argument(f)
    opts.add_argument(f"--user-data-dir={profile}")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    try:
        driver.set_page_load_timeout(page_load_timeout_s)
        driver.get("about:blank")
        driver.get_log("performance")           # drop the start-up page's entries
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def severe(logs: list[dict]) -> list[str]:
    """The console messages of level SEVERE (errors) among ``driver.get_log("browser")`` entries."""
    return [e.get("message", "") for e in logs if e.get("level") == "SEVERE"]


def external_requests(driver) -> list[str]:
    """Network URLs (http, https, ws, wss, ftp) requested since the last call: a self-contained page
    requests none (local ``file:``, ``data:``, ``blob:`` and the browser's own ``chrome:`` pages are
    not network requests)."""
    import json  # noqa: PLC0415
    urls = []
    for entry in driver.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg.get("method") == "Network.requestWillBeSent":
            url = msg["params"]["request"]["url"]
            if url.split(":", 1)[0].lower() in ("http", "https", "ws", "wss", "ftp"):
                urls.append(url)
    return urls
