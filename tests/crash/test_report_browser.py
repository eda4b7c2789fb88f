"""The HTML report in real headless Chromium: it renders the grids and coverage, with no console output."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest

from crashmatrix.reports.write import ReportFile, write_reports
from tests.unit.test_reports_data import DECLARED, FAILING, sample_results

pytestmark = pytest.mark.crash
CHROMIUM = Path("/usr/bin/chromium")
TIMEOUT_S = 120  # a cold start on a loaded, shared machine can take a while
# Everything that could make the browser touch the network, or wait on a service, is off.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--disable-extensions", "--enable-logging=stderr", "--v=0"]

# Skipped on a developer's machine without Chromium (the reason says so in pytest's summary); never
# in CI (`CI` set, as .ci/run sets it): there a missing browser fails the test, so a green run
# cannot have proved less than it says.
needs_chromium = pytest.mark.skipif(not CHROMIUM.exists() and not os.environ.get("CI"), reason=(
    f"{CHROMIUM} is not installed (Debian: apt-get install chromium; .ci/run installs it)"))


@dataclass
class Page:
    dom: str
    console: list[str]  # every console message (log, warning, error, uncaught exception)


def load_page(page: Path, profile: Path) -> Page:
    """Dump the DOM after the page's scripts ran; Chromium logs console messages to stderr."""
    proc = subprocess.Popen(
        [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        # Chromium's helper processes share its new session's process group; end them all, even
        # when the browser hangs or exits early, so no test leaves a browser behind.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    assert proc.returncode == 0 or out, f"chromium failed ({proc.returncode}): {err[-2000:]}"
    return Page(out, [line for line in err.splitlines() if ":CONSOLE" in line or "Uncaught" in line])


class Dom(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def all(self, tag: str, **want: str) -> list[dict[str, str]]:
        return [a for t, a in self.tags if t == tag and all(a.get(k) == v for k, v in want.items())]


@needs_chromium
def test_the_report_renders_its_grids_and_coverage_without_console_messages(tmp_path: Path) -> None:
    results = sample_results()
    write_reports(results, tmp_path / "out", DECLARED)
    page = load_page(tmp_path / "out" / ReportFile.HTML.value, tmp_path / "profile")
    assert page.console == []
    dom = Dom()
    dom.feed(page.dom)
    (body,) = dom.all("body")
    assert body.get("data-rendered") == "1", "the page's script ran to its end"
    assert body.get("data-grids") == "2"
    assert [t["data-scenario"] for t in dom.all("table", **{"class": "grid"})] == ["changelog", "tool-stop"]
    titles = [td["title"] for td in dom.all("td") if td.get("class", "").startswith("cell v-")]
    assert f"{FAILING}: violated" in titles
    assert len([t for t in titles if not t[0].isdigit()]) == sum(1 for r in results if r.depth == 1)
    assert len(dom.all("table", id="coverage")) == 1
    assert len(dom.all("tr", **{"class": "s-reached"})) == 3
    assert len(dom.all("tr", **{"class": "s-unreached"})) == 1
    assert len(dom.all("section", **{"class": "timeline"})) == 5


@needs_chromium
def test_the_check_sees_console_errors_and_blocked_network_requests(tmp_path: Path) -> None:
    # Guards the test above against a Chromium whose logging changed: it must see these.
    bad = tmp_path / "bad.html"
    bad.write_text(
        '<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; script-src 'unsafe-inline'\"></head><body>"
        '<img src="http://192.0.2.1/x.png"><script>console.error("boom"); missing();</script>'
        "</body></html>", encoding="utf-8")
    page = load_page(bad, tmp_path / "profile")
    text = "\n".join(page.console)
    assert '"boom"' in text
    assert "Uncaught ReferenceError: missing is not defined" in text
    assert "Content Security Policy" in text
