"""examples/ci/: the CI recipes run as written (on a tiny matrix), and cannot report green by mistake.

No YAML parser (PyYAML is not a dependency): the `crashmatrix ...` lines are taken from the files
by a regex, run through bash as the CI would run them, and the structure that keeps a failing or
missing shard from going green is checked on the text (comments removed first, so a comment can
never satisfy a check).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytestmark = pytest.mark.crash
ROOT = Path(__file__).resolve().parents[2]
CI = ROOT / "examples" / "ci"
SCENARIOS = str(ROOT / "tests" / "support" / "scenarios")
GITHUB, GITLAB = "github-actions.yml", "gitlab-ci.yml"
# The shell variables each recipe passes as K and N of `--shard K/N`.
SHARD_VARS = {GITHUB: ("SHARD", "SHARDS"), GITLAB: ("CI_NODE_INDEX", "CI_NODE_TOTAL")}
COMMAND = re.compile(r"^[ \t]*(?:-[ \t]+)?(?:run:[ \t]+)?(crashmatrix[ \t].*?)[ \t]*$", re.M)
# Anything that turns a failing command or job into a passing one.
SWALLOWERS = ("continue-on-error", "allow_failure", "set +e", "|| true", "|| :", "|| exit 0")


def code(text: str) -> str:
    """The text without comments: whole-line comments and ` # ...` tails."""
    lines = (re.sub(r"(^|\s)#.*$", "", line).rstrip() for line in text.splitlines())
    return "\n".join(line for line in lines if line.strip())


def commands(text: str) -> list[str]:
    return COMMAND.findall(code(text))


def jobs(text: str, indent: str) -> dict[str, str]:
    """Job name -> its block, for jobs whose keys start at `indent`."""
    parts = re.split(rf"^{indent}([\w-]+):[ \t]*$", code(text), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def job_with(blocks: dict[str, str], command: str) -> tuple[str, str]:
    found = [(name, block) for name, block in blocks.items() if re.search(rf"crashmatrix {command}\b", block)]
    assert len(found) == 1, f"one job runs `crashmatrix {command}`, found {[n for n, _ in found]}"
    return found[0]


def problems(name: str, text: str) -> list[str]:
    """Why this recipe could report green with a violation or a missing shard (empty: it cannot)."""
    out: list[str] = []
    body = code(text)
    out += [f"{s!r} swallows a failure" for s in SWALLOWERS if s in body]
    cmds = commands(text)
    out += [f"{c!r}: no `|`, `;` or `&` on a crashmatrix line" for c in cmds if re.search(r"[|;&]", c)]
    out += [f"{c!r}: one line per command" for c in cmds if c.endswith("\\")]
    k, n = SHARD_VARS[name]
    kinds = [c.split()[1] for c in cmds]
    if kinds != ["run", "merge", "report"]:
        return [*out, f"expected run, merge, report in that order, found {kinds}"]
    run, merge, report = cmds
    if not re.search(rf'--shard "\${k}/\${n}"', run) or f'--out "out-${k}"' not in run:
        out.append(f"{run!r}: want --shard \"${k}/${n}\" --out \"out-${k}\"")
    if "--depth 2" not in run:
        out.append(f"{run!r}: want the deep matrix, --depth 2")
    if merge != "crashmatrix merge out-* --out merged":
        out.append(f"{merge!r}: want `crashmatrix merge out-* --out merged`")
    if report != "crashmatrix report merged":
        out.append(f"{report!r}: want `crashmatrix report merged`")
    try:
        if name == GITHUB:
            out += github_problems(text)
        else:
            out += gitlab_problems(text)
    except AssertionError as exc:
        out.append(str(exc))
    return out


def github_problems(text: str) -> list[str]:
    out = []
    blocks = jobs(text.split("\njobs:\n", 1)[-1], "  ")
    shard_name, shard = job_with(blocks, "run")
    _, merge = job_with(blocks, "merge")
    if "fail-fast: false" not in shard:
        out.append("shard job: a failing shard must not cancel the others (fail-fast: false)")
    shards = re.search(r"^\s+shard: \[([\d, ]+)\]$", shard, re.M)
    total = re.search(r"^\s+SHARDS: (\d+)$", code(text), re.M)
    if not shards or not total or [int(s) for s in shards[1].split(",")] != list(
            range(1, int(total[1]) + 1)):
        out.append("the `shard:` list must be 1..SHARDS")
    upload = shard.split("actions/upload-artifact", 1)
    if len(upload) != 2 or "if: always()" not in upload[0].rsplit("- ", 1)[-1] or \
            "name: out-${{ matrix.shard }}" not in upload[1]:
        out.append("shard job: upload out-K as artifact out-K, `if: always()`")
    if not re.search(r"^    if: always\(\)$", merge, re.M):
        out.append("merge job: must run when a shard failed (job-level `if: always()`)")
    if not re.search(rf"^    needs: \[?{shard_name}\]?$", merge, re.M):
        out.append(f"merge job: must need {shard_name}")
    if "pattern: out-*" not in merge.split("actions/download-artifact", 1)[-1]:
        out.append("merge job: download every out-* artifact")
    if "merged/report.html" not in merge.split("actions/upload-artifact", 1)[-1]:
        out.append("merge job: upload merged/report.html")
    return out


def gitlab_problems(text: str) -> list[str]:
    out = []
    blocks = jobs(text, "")
    shard_name, shard = job_with(blocks, "run")
    _, merge = job_with(blocks, "merge")
    if not re.search(r"^  parallel: \d+$", shard, re.M):
        out.append("shard job: `parallel: N`")
    if not re.search(r"^  artifacts:\n(    .*\n)*?    when: always$", shard, re.M):
        out.append("shard job: artifacts `when: always`")
    if not re.search(r"^  when: always$", merge, re.M):
        out.append("merge job: must run when a shard failed (`when: always`)")
    if not re.search(rf"^  needs:\n    - (job: )?{shard_name}$", merge, re.M):
        out.append(f"merge job: must need {shard_name}")
    script = merge.split("  script:\n", 1)[-1].split("\n  after_script:", 1)[0]
    if "crashmatrix merge" not in script:
        out.append("merge job: the merge decides the job, so it belongs in `script`")
    if not re.search(r"^      junit: merged/junit.xml$", merge, re.M):
        out.append("merge job: artifacts:reports:junit merged/junit.xml")
    return out


@pytest.mark.parametrize("name", [GITHUB, GITLAB])
def test_recipe_has_nothing_that_could_report_green(name: str) -> None:
    assert problems(name, (CI / name).read_text(encoding="utf-8")) == []


def _drop_line(pattern: str) -> Callable[[str], str]:
    return lambda t: re.sub(rf"^.*{pattern}.*\n", "", t, count=1, flags=re.M)


MUTATIONS: dict[str, Callable[[str], str]] = {
    "run || true": lambda t: re.sub(r"^(.*crashmatrix run .*)$", r"\1 || true", t, count=1, flags=re.M),
    "merge || true": lambda t: re.sub(r"^(.*crashmatrix merge .*)$", r"\1 || true", t, count=1, flags=re.M),
    "no merge": _drop_line(r"crashmatrix merge "),
    "merge commented out": lambda t: re.sub(r"^(\s*)(-\s+|run:\s+)?(crashmatrix merge)", r"\1\2# \3", t,
                                            count=1, flags=re.M),
    "no always": lambda t: re.sub(r"^(  |    )(if|when): always(\(\))?$", r"\1\2: on_success", t,
                                  flags=re.M),
    "continue-on-error": lambda t: t.replace("    steps:\n", "    continue-on-error: true\n    steps:\n")
    if "steps:" in t else t.replace("  when: always\n", "  when: always\n  allow_failure: true\n"),
    "fail-fast or parallel": lambda t: t.replace("fail-fast: false", "fail-fast: true")
    .replace("parallel: 4", "parallel: many"),
}


@pytest.mark.parametrize("name", [GITHUB, GITLAB])
@pytest.mark.parametrize("mutation", list(MUTATIONS))
def test_the_checks_catch_a_recipe_edited_to_lie(name: str, mutation: str) -> None:
    text = (CI / name).read_text(encoding="utf-8")
    edited = MUTATIONS[mutation](text)
    assert edited != text, f"mutation {mutation!r} changed nothing in {name}"
    assert problems(name, edited), f"{name} with {mutation!r} passed the checks"


def _sh(line: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """One recipe line through bash, as the CI runs it, with this interpreter's crashmatrix."""
    assert line.startswith("crashmatrix ")
    line = f"{shlex.quote(sys.executable)} -m crashmatrix{line.removeprefix('crashmatrix')}"
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", line], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("name", [GITHUB, GITLAB])
def test_recipe_commands_run_and_a_missing_shard_fails_the_merge(tmp_path: Path, name: str) -> None:
    run, merge, report = commands((CI / name).read_text(encoding="utf-8"))
    assert run.count("--depth 2") == 1
    tiny = run.replace("--depth 2", f"--scenario tiny --scenarios {shlex.quote(SCENARIOS)}")
    k_var, n_var = SHARD_VARS[name]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CI_"))}
    shards = tmp_path / "shards"
    shards.mkdir()
    for k in (1, 2):
        proc = _sh(tiny, shards, {**env, k_var: str(k), n_var: "2"})
        assert proc.returncode == 0, (tiny, proc.stderr)
    outs = sorted(p.name for p in shards.iterdir())
    assert outs == ["out-1", "out-2"]

    # All shards: merge exits 0, report renders; on GitHub it also fills the job's step summary.
    everything = tmp_path / "all"
    shutil.copytree(shards, everything)
    step_summary = tmp_path / "step-summary.md"
    merge_env = {**env, "GITHUB_STEP_SUMMARY": str(step_summary) if name == GITHUB else ""}
    proc = _sh(merge, everything, merge_env)
    assert proc.returncode == 0, proc.stderr
    assert "2 of 2 shards present" in proc.stderr
    assert _sh(report, everything, merge_env).returncode == 0
    for f in ("summary.md", "junit.xml", "report.html"):
        assert (everything / "merged" / f).stat().st_size > 0, f
    if name == GITHUB:
        assert step_summary.read_text(encoding="utf-8") == (everything / "merged" / "summary.md").read_text(
            encoding="utf-8")

    # One shard's artifact lost: the merge, the job's verdict, exits 3 and names it.
    partial = tmp_path / "partial"
    shutil.copytree(shards, partial)
    shutil.rmtree(partial / "out-2")
    proc = _sh(merge, partial, merge_env)
    assert proc.returncode == 3, proc.stderr
    assert "missing: 2/2" in proc.stderr
    proc = _sh(report, partial, merge_env)
    assert proc.returncode == 3
    assert "INCOMPLETE" in (partial / "merged" / "summary.md").read_text(encoding="utf-8")


APP = "app-github-actions.yml"
SUPPORT = ROOT / "examples" / "support_app"


def app_problems(text: str) -> list[str]:
    """Why the recipe for a user's app could go green with a new failure, or stay red on a known one."""
    out = [f"{s!r} swallows a failure" for s in SWALLOWERS if s in code(text)]
    cmds = commands(text)
    if [c.split()[1] for c in cmds] != ["run", "merge", "report"]:
        return [*out, f"expected run, merge, report in that order, found {cmds}"]
    run, merge, report = cmds
    wanted = ('--shard "$SHARD/$SHARDS"', '--out "out-$SHARD"', '--baseline "$BASELINE"', '--agent "$AGENT"')
    for want in wanted:
        if want not in run:
            out.append(f"{run!r}: want {want}")
    if merge != 'crashmatrix merge out-* --out merged --baseline "$BASELINE"':
        out.append(f"{merge!r}: want the merge judged against the baseline")
    if report != "crashmatrix report merged":
        out.append(f"{report!r}: want `crashmatrix report merged`")
    try:
        out += github_problems(text)
    except AssertionError as exc:
        out.append(str(exc))
    return out


def test_the_app_recipe_has_nothing_that_could_report_green() -> None:
    text = (CI / APP).read_text(encoding="utf-8")
    assert app_problems(text) == []
    for mutation in ("run || true", "no merge", "no always", "continue-on-error"):
        assert app_problems(MUTATIONS[mutation](text)), mutation
    assert app_problems(text.replace(' --baseline "$BASELINE"', "", 1)), "a shard run without the baseline"


def test_the_app_recipe_runs_and_keeps_its_exit_codes(tmp_path: Path) -> None:
    """Issue 34, item 3: the support example's matrix in two shards against its baseline: green
    with its known failures; red, naming the case, when the baseline forgets one."""
    text = (CI / APP).read_text(encoding="utf-8")
    run, merge, report = commands(text)
    app = tmp_path / "support_app"
    shutil.copytree(SUPPORT, app, ignore=shutil.ignore_patterns("__pycache__", "out-*", "merged"))
    agent = re.search(r'^  AGENT: "([^"]+)"', text, re.M)
    baseline = re.search(r"^  BASELINE: (\S+)", text, re.M)
    assert agent
    assert baseline
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CI_"))}
    env |= {"AGENT": agent[1], "BASELINE": baseline[1], "SHARDS": "2"}
    # The two shard jobs run side by side, as the CI runs them.
    with ThreadPoolExecutor(2) as pool:
        shards = list(pool.map(lambda k: _sh(run, app, {**env, "SHARD": str(k)}), (1, 2)))
    for proc in shards:
        assert proc.returncode == 0, (run, proc.stderr[-3000:])
    proc = _sh(merge, app, env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    known = json.loads((app / baseline[1]).read_text(encoding="utf-8"))["cases"]
    assert f"{len(known)} known failure(s) failed again, 0 new, 0 now hold" in proc.stderr
    assert _sh(report, app, env).returncode == 0
    assert (app / "merged" / "report.html").stat().st_size > 0
    forgotten = sorted(known)[0]
    (app / baseline[1]).write_text(json.dumps({"format": 1, "cases": {
        c: v for c, v in known.items() if c != forgotten}}), encoding="utf-8")
    shutil.rmtree(app / "merged")
    proc = _sh(merge, app, env)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert f"new failure: {forgotten} [" in proc.stderr
