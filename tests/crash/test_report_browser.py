"""The HTML report in real headless Chromium: grids and coverage, and a real mutant's failing run (index,
grouped failures, the doubled CHANGELOG line, the request history, CJK text), screenshotted."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.harness.records.violation import InvariantId
from crashmatrix.reports.html_style import MONO, SANS
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


def run_chromium(args: list[str]) -> tuple[int, str, str]:
    """Chromium with these arguments (and FLAGS): its exit code, stdout and stderr."""
    proc = subprocess.Popen([str(CHROMIUM), *FLAGS, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        # Chromium's helper processes share its new session's process group; end them all, even
        # when the browser hangs or exits early, so no test leaves a browser behind.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    return proc.returncode, out, err


def load_page(page: Path, profile: Path) -> Page:
    """Dump the DOM after the page's scripts ran; Chromium logs console messages to stderr."""
    code, out, err = run_chromium([f"--user-data-dir={profile}", "--dump-dom", page.as_uri()])
    assert code == 0 or out, f"chromium failed ({code}): {err[-2000:]}"
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
    assert len(dom.all("details", **{"class": "case"})) == 5


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


# -- a real failing run: a mutant that skips the tool_started intent ----------------------------

REPO = Path(__file__).resolve().parents[2]
MUTANT = "mutant:no-tool-started"  # no intent: a crash after the append re-runs it, a doubled line
LINE = "修复登录超时"  # the changelog scenarios' line (scenarios/builtin/changelog-fast.toml)
# The one stored page's screenshot, kept for CI to upload: where CRASHMATRIX_ARTIFACTS says.
ARTIFACTS = Path(os.environ.get("CRASHMATRIX_ARTIFACTS") or REPO / "test-artifacts")


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node | str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text for c in self.children)

    def find(self, tag: str | None = None, cls: str | None = None, **want: str) -> list[Node]:
        """Every element below (and including) this one with the tag, a class word and attributes."""
        out = []
        if ((tag is None or self.tag == tag) and (cls is None or cls in self.attrs.get("class", "").split())
                and all(self.attrs.get(k.replace("_", "-")) == v for k, v in want.items())):
            out.append(self)
        for c in self.children:
            if isinstance(c, Node):
                out += c.find(tag, cls, **want)
        return out


class Tree(HTMLParser):
    """The dumped DOM as a tree (Chromium serialises every element closed, void ones aside)."""

    VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
                      "source", "track", "wbr"})

    def __init__(self, text: str) -> None:
        super().__init__()
        self.root = Node("#document", {})
        self.stack = [self.root]
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in self.VOID:
            self.stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        while len(self.stack) > 1:
            if self.stack.pop().tag == tag:
                break

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


@pytest.fixture(scope="module")
def failing_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real mutant's run of the changelog-fast scenario (single crashes): it fails, and writes
    reports. (`changelog`, the same with a real `pytest -q` in each bash call, costs four times
    the CPU and adds nothing the report shows.)"""
    out = tmp_path_factory.mktemp("mutant-run") / "out"
    proc = subprocess.run([sys.executable, "-m", "crashmatrix", "run", "--agent", MUTANT, "--scenario",
                           "changelog-fast", "--jobs", "2", "--out", str(out)],
                          capture_output=True, text=True, timeout=600, check=False, cwd=REPO)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    return out


def _results(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]


def _key(r: dict[str, Any]) -> tuple[str, str]:
    """A failure's root cause, worked out here from the record alone (not by the report's code):
    the first invariant it broke in the verifier's order, and the tool, service or file its
    violation names (in that order)."""
    order = list(InvariantId)
    broken = sorted({InvariantId(v["invariant"]) for v in r["violations"]}, key=order.index)
    if not broken:
        return r["verdict"], ""
    first = next(v for v in r["violations"] if v["invariant"] == broken[0].value)
    evidence = first.get("evidence") or {}
    return broken[0].value, next((evidence[k] for k in ("tool", "service", "path") if evidence.get(k)), "")


@needs_chromium
def test_a_mutants_failing_run_shows_index_groups_the_doubled_line_and_requests(
        failing_run: Path, tmp_path: Path) -> None:
    results = _results(failing_run)
    failing = [r for r in results if r["verdict"] != "pass"]
    assert failing, "the mutant must be caught for this test to see failures"
    assert all(r["evidence"] for r in failing)
    assert all(r["evidence"] is None for r in results if r["verdict"] == "pass")
    page = load_page(failing_run / ReportFile.HTML.value, tmp_path / "profile")
    assert page.console == []
    dom = Tree(page.dom).root
    (body,) = dom.find("body")
    assert body.attrs.get("data-rendered") == "1"

    # The index: a row per scenario, its counts those of results.jsonl.
    (index,) = dom.find("table", id="index")
    rows = index.find("tr", data_scenario="changelog-fast")
    assert len(rows) == 1
    mine = [r for r in results if r["scenario"] == "changelog-fast"]
    cells = [td.text for td in rows[0].find("td")]
    assert cells[:4] == ["changelog-fast", str(len(mine)), str(sum(r["verdict"] == "pass" for r in mine)),
                         str(sum(r["verdict"] == "fail" for r in mine))]
    (link,) = rows[0].find("a")
    assert dom.find(id=link.attrs["href"][1:]), "the scenario's name links to its section"

    # Distinct failures: a group per cause, each with as many cases as results.jsonl has.
    keys = Counter(_key(r) for r in failing)
    found = {(g.attrs["data-root"], g.attrs["data-subject"]): g for g in dom.find("details", "group")}
    assert set(found) == set(keys)
    for key, count in keys.items():
        assert found[key].attrs["data-cases"] == str(count)
        assert len(found[key].find(cls="case")) == count
    assert max(keys.values()) > 1, "some group holds more than one case"
    assert all(g.attrs["data-invariants"].split()[0] == root for (root, _), g in found.items())
    assert cells[5] == str(len(keys))

    # The diff: the CHANGELOG line the mutant appended twice carries the duplicate class.
    doubled = [r for r in failing for f in r["evidence"]["files"]
               if f["path"] == "CHANGELOG.md" and f["after"].count(LINE) == 2]
    assert doubled, "a case of this mutant doubles the line"
    (case,) = dom.find("details", "case", data_case=doubled[0]["case"])
    (changelog,) = case.find("div", "file", data_path="CHANGELOG.md")
    dups = [s for s in changelog.find("span", "dup") if LINE in s.text]
    assert len(dups) == 2
    assert all("⚠ ×2" in s.text for s in dups)
    assert not [s for s in case.find("span", "d-add") if LINE in s.text and "dup" not in s.attrs["class"]]

    # The request history that case's provider requests sent, message by message.
    sent = [m for q in doubled[0]["evidence"]["requests"] for m in q["messages"] if m.get("content")]
    shown = {pre.text for ol in case.find("ol", "history") for pre in ol.find("pre")}
    assert sent
    assert {m["content"] for m in sent} <= shown
    assert any(LINE in text for text in shown)


def _cjk_families() -> list[str]:
    """The families of the CJK fonts fontconfig knows (none: no CJK font is installed)."""
    if shutil.which("fc-list") is None:
        return []
    out = subprocess.run(["fc-list", ":lang=zh", "family"], capture_output=True, text=True, timeout=60,
                         check=False).stdout
    return sorted({name.strip() for line in out.splitlines() for name in line.split(",")})


# No CJK font: skipped on a developer's machine, never in CI (.ci/run installs fonts-wqy-microhei).
needs_cjk_font = pytest.mark.skipif(not _cjk_families() and not os.environ.get("CI"), reason=(
    "no CJK font is installed (Debian: apt-get install fonts-wqy-microhei; .ci/run installs it)"))


@needs_chromium
@needs_cjk_font
def test_the_chinese_changelog_line_is_set_in_an_installed_cjk_font(failing_run: Path,
                                                                    tmp_path: Path) -> None:
    families = _cjk_families()
    named = [f for f in families if f'"{f}"' in SANS]
    assert named, f"the report's font stack names none of the CJK fonts installed: {families}"
    assert [f for f in families if f'"{f}"' in MONO]
    # A copy of the page with one more script, which reads what the browser computed for the
    # diff line that holds the Chinese text, and writes it into the DOM the test dumps.
    code = """
      var line = Array.prototype.filter.call(document.querySelectorAll("pre.diff span"),
        function (s) { return s.textContent.indexOf("LINE") >= 0; })[0];
      var head = document.querySelector("h1");
      document.body.setAttribute("data-line-font", line ? getComputedStyle(line).fontFamily : "");
      document.body.setAttribute("data-text-font", getComputedStyle(head).fontFamily);
    """.replace("LINE", LINE)
    # The page's policy runs its own script only, by hash: the copy allows this one by its hash too.
    digest = base64.b64encode(hashlib.sha256(code.encode("utf-8")).digest()).decode("ascii")
    copy = tmp_path / "probe.html"
    copy.write_text((failing_run / ReportFile.HTML.value).read_text(encoding="utf-8")
                    .replace("script-src '", f"script-src 'sha256-{digest}' '", 1)
                    .replace("</body>", f"<script>{code}</script></body>"), encoding="utf-8")
    page = load_page(copy, tmp_path / "profile")
    (body,) = Tree(page.dom).root.find("body")
    assert LINE in body.text
    for attr in ("data-line-font", "data-text-font"):
        assert any(f'"{f}"' in body.attrs[attr] or f in body.attrs[attr].split(", ")
                   for f in named), body.attrs[attr]


@needs_chromium
def test_a_screenshot_of_the_failing_report_is_kept_for_ci(failing_run: Path, tmp_path: Path) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report-failing-run.png"
    shot.unlink(missing_ok=True)
    code, _, err = run_chromium([f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}",
                                 "--window-size=1280,2000", (failing_run / ReportFile.HTML.value).as_uri()])
    assert shot.exists(), f"no screenshot ({code}): {err[-2000:]}"
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 50_000, "a 1280x2000 page of text and colour is no tiny image"
