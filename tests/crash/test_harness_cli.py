"""`crashmatrix` end to end: determinism, repro, shards and merge, SIGINT, hung agents, bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

pytestmark = pytest.mark.crash
SCENARIOS = str(Path(__file__).resolve().parents[1] / "support" / "scenarios")
CLI = [sys.executable, "-m", "crashmatrix"]


def crashmatrix(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, check=False)


def results(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def leftovers(marker: str) -> list[str]:
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if marker in cmd and p.pid != os.getpid():
            found.append(f"{p.pid}: {cmd[:120]}")
    return found


def tiny(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return crashmatrix("run", "--scenarios", SCENARIOS, "--scenario", "tiny", "--out", str(out),
                       "--json", *extra)


def test_run_is_deterministic_and_leaves_no_process(tmp_path: Path) -> None:
    first = tiny(tmp_path / "a", "--keep")
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    rows = results(tmp_path / "a")
    assert summary["cases"] == len(rows) == summary["passed"] > 20
    assert summary["failed"] == 0
    assert summary["scenarios"] == {"tiny": {"cases": len(rows), "passed": len(rows), "failed": 0}}
    assert leftovers(str(tmp_path)) == []
    second = tiny(tmp_path / "b")
    assert second.returncode == 0

    def key(rows: list[dict[str, Any]]) -> list[tuple[str, str, list[list[str]]]]:
        return sorted((r["case"], r["verdict"], r["trace"]) for r in rows)

    assert key(rows) == key(results(tmp_path / "b")), "same crash points, events and verdicts"


def test_repro_reproduces_a_case_identically(tmp_path: Path) -> None:
    assert tiny(tmp_path / "a").returncode == 0
    row = next(r for r in results(tmp_path / "a") if ":effect.after:read/" in r["case"])
    proc = crashmatrix("repro", row["case"], "--scenarios", SCENARIOS)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"case {row['case']}: PASS")
    shown: list[list[str]] = []
    for line in proc.stdout.splitlines():
        if line.startswith("-- incarnation"):
            shown.append([])
        elif shown and line[:8].strip().isdigit() and line.startswith("   "):
            shown[-1].append(line.split()[1])
    assert shown == row["trace"]
    assert "XX SIGKILL here" in proc.stdout


def test_shards_are_disjoint_complete_and_merge(tmp_path: Path) -> None:
    assert tiny(tmp_path / "full").returncode == 0
    full = {r["case"] for r in results(tmp_path / "full")}
    parts = []
    for k in (1, 2, 3):
        proc = tiny(tmp_path / f"s{k}", "--shard", f"{k}/3")
        assert proc.returncode == 0, proc.stderr
        parts.append({r["case"] for r in results(tmp_path / f"s{k}")})
    assert parts[0] | parts[1] | parts[2] == full
    assert not (parts[0] & parts[1])
    assert not (parts[0] & parts[2])
    assert not (parts[1] & parts[2])
    merged = crashmatrix("merge", *(str(tmp_path / f"s{k}") for k in (1, 2, 3)),
                         "--out", str(tmp_path / "m"), "--json")
    assert merged.returncode == 0, merged.stderr
    assert json.loads(merged.stdout)["cases"] == len(full)
    assert {r["case"] for r in results(tmp_path / "m")} == full


def interrupt_after_results(proc: subprocess.Popen[str], out: Path, count: int,
                            wait_s: float) -> tuple[str, str]:
    """SIGINT once `count` results are saved (or `wait_s` passed); the run's stdout and stderr."""
    deadline = time.monotonic() + wait_s
    path = out / "results.jsonl"
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().splitlines()) >= count:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    return proc.communicate(timeout=60)


def test_sigint_keeps_partial_results_and_reaps_children(tmp_path: Path) -> None:
    out = tmp_path / "out"
    # Depth 2 (~1,700 cases): far more than can finish between the third result and the SIGINT.
    proc = subprocess.Popen([*CLI, "run", "--scenario", "changelog-fast", "--depth", "2",
                             "--out", str(out), "--keep"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = interrupt_after_results(proc, out, 3, wait_s=300)
    assert proc.returncode == 3, err
    assert "interrupted" in err
    kept = results(out)
    assert len(kept) >= 3
    assert all(r["verdict"] == "pass" for r in kept)
    time.sleep(0.2)
    assert leftovers(str(tmp_path)) == []


def test_a_hung_agent_is_a_liveness_verdict(tmp_path: Path) -> None:
    began = time.time() - 1  # process start times are wall clock, to the tick
    started = time.monotonic()
    proc = crashmatrix("repro", "hang/none", "--scenarios", SCENARIOS, "--timeout", "3", "--keep")
    elapsed = time.monotonic() - started
    assert proc.returncode == 1, proc.stderr
    assert "liveness" in proc.stdout
    assert elapsed < 60
    kept = proc.stdout.strip().splitlines()[-1].removeprefix("kept: ")
    assert leftovers(kept) == []
    # Machine-wide, but only those started during this test: on a shared machine another run's
    # hung agent may be asleep too.
    assert not [p for p in psutil.process_iter(["cmdline", "create_time"])
                if p.info["cmdline"] == ["sleep", "300"] and p.info["create_time"] >= began]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--scenario", "nope"], "unknown scenario 'nope'"),
        (["run", "--shard", "4/3"], "--shard '4/3'"),
        (["run", "--shard", "x"], "expected K/N"),
        (["repro", "changelog/99:effect.after:append_note/kill"], "nearest: changelog/"),
        (["repro", "chnagelog/none"], "did you mean changelog"),
        (["repro", "changelog/oops"], "bad crash step"),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(args: list[str], message: str) -> None:
    proc = crashmatrix(*args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_merge_of_a_damaged_file_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "results.jsonl"
    bad.write_text('{"case": "a/none", "verdict": "pass", "scenario": "a", "depth": 0}\nnot json\n')
    proc = crashmatrix("merge", str(bad), "--out", str(tmp_path / "m"))
    assert proc.returncode == 2
    assert f"{bad}: line 2" in proc.stderr
    assert not (tmp_path / "m" / "results.jsonl").exists()


def test_fork_and_fresh_spawning_give_the_same_events_and_verdicts(tmp_path: Path) -> None:
    for mode in ("fork", "fresh"):
        proc = tiny(tmp_path / mode, "--spawn", mode)
        assert proc.returncode == 0, proc.stderr

    def key(rows: list[dict[str, Any]]) -> list[tuple[str, str, list[list[str]], list[int | None]]]:
        return sorted((r["case"], r["verdict"], r["trace"], r["exit_codes"]) for r in rows)

    assert key(results(tmp_path / "fork")) == key(results(tmp_path / "fresh"))


def test_bench_measures_both_modes_side_by_side_and_its_figures_agree(tmp_path: Path) -> None:
    proc = crashmatrix("bench", "--scenarios", SCENARIOS, "--scenario", "tiny", "--repeat", "2",
                       "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    listed = crashmatrix("list", "--scenarios", SCENARIOS, "--scenario", "tiny", "--cases")
    one_matrix = len(listed.stdout.splitlines())
    assert data["cases"] == 2 * one_matrix  # the fork matrix ran twice (--repeat 2)
    fresh, fork = data["fresh"], data["fork"]
    assert data["ratio"] == pytest.approx(fork["cases_per_s"] / fresh["cases_per_s"], rel=0.02)
    assert fork["ms_per_case"] == pytest.approx(1000 / fork["cases_per_s"], rel=0.02)
    assert data["floor_multiple"] == pytest.approx(fork["ms_per_case"] / data["floor_ms"], abs=0.1)
    assert data["incarnations_per_case"] >= 2
    assert len(data["rss_after_each_repeat_mb"]) == 2
    assert 0 < data["peak_rss_mb"] < 1000
    assert data["failed"] == 0
    # Where the CPU went, per case, and what follows from it.
    cpu = fork["cpu"]
    assert cpu["harness_ms_per_case"] > 0
    assert cpu["agents_ms_per_case"] > 0
    busy = (cpu["harness_ms_per_case"] + cpu["agents_ms_per_case"]) * fork["cases_per_s"] / 1000
    assert cpu["cores_busy"] == pytest.approx(busy, rel=0.05)
    cores = min(2, os.cpu_count() or 1)  # bench's default --jobs 2
    assert cpu["agents_bound_cases_per_s"] == pytest.approx(1000 * cores / cpu["agents_ms_per_case"],
                                                            rel=0.02)


def test_the_bench_counts_the_cpu_of_agents_a_child_of_the_harness_reaped(tmp_path: Path) -> None:
    """A zygote's agents are its children: their CPU is in the zygote's reaped-children times,
    not in the harness's. One that burns half a second of CPU is charged to the agents."""
    from crashmatrix.harness.cli.bench import cpu_seconds  # noqa: PLC0415 - the bench's own reading

    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass\n"
    zygote = ("import os, sys\npid = os.fork()\nif pid == 0:\n    exec(sys.argv[1])\n    os._exit(0)\n"
              "os.waitpid(pid, 0)\nprint('reaped', flush=True)\nsys.stdin.read()\n")
    own, theirs = cpu_seconds()
    proc = subprocess.Popen([sys.executable, "-c", zygote, burn], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "reaped\n"
        own_after, theirs_after = cpu_seconds()  # the zygote still alive, its agent reaped
    finally:
        proc.communicate("", timeout=30)
    assert theirs_after - theirs >= 0.45
    assert own_after - own < 0.2


def test_a_scenario_max_depth_caps_deeper_schedules_and_says_so(tmp_path: Path) -> None:
    proc = crashmatrix("run", "--scenario", "policy-loosened", "--depth", "2",
                       "--out", str(tmp_path / "out"), "--json")
    assert proc.returncode == 0, proc.stderr
    assert "policy-loosened: schedules capped at depth 1 by its [matrix] max_depth" in proc.stderr
    single = crashmatrix("list", "--scenario", "policy-loosened", "--cases").stdout.splitlines()
    assert json.loads(proc.stdout)["cases"] == len(single)
    assert {r["depth"] for r in results(tmp_path / "out")} == {0, 1}


def test_a_registered_adapter_is_run_by_name_and_its_repro_names_it(tmp_path: Path) -> None:
    # messages-only is registered by entry point like any third party's adapter; it has no
    # recovery rules, so the changelog matrix must catch it, and each repro line must re-run it.
    proc = crashmatrix("run", "--agent", "messages-only", "--scenario", "changelog-fast",
                       "--out", str(tmp_path / "out"), "--json")
    assert proc.returncode == 1, proc.stderr
    failure = json.loads(proc.stdout)["failures"][0]
    assert failure["repro"].endswith("--agent messages-only")
    args = failure["repro"].split()[1:]
    again = crashmatrix(*args)
    assert again.returncode == 1, again.stderr
    violated = {line.split(":")[0].strip() for line in again.stdout.splitlines()
                if line.startswith("   ") and not line.startswith("      ")}
    assert set(failure["invariants"]) <= violated


def test_an_unknown_agent_or_fault_is_a_usage_error(tmp_path: Path) -> None:
    proc = crashmatrix("run", "--agent", "nope", "--scenario", "changelog-fast", "--out", str(tmp_path))
    assert proc.returncode == 2
    assert "unknown agent 'nope' (known: durable-agent, " in proc.stderr
    assert "messages-only" in proc.stderr
    proc = crashmatrix("repro", "changelog-fast/11:effect.after:append_note/zap")
    assert proc.returncode == 2
    assert ("unknown fault 'zap' (known: eio-fsync, enospc-write, error-after-apply, "
            "error-before-apply, kill, kill-after-apply, power, power-blocks, power-keep1, power-names, "
            "power-subsets, "
            "reply-lost, second, short-write, timeout, torn)") in proc.stderr


def test_a_broken_plugin_or_scenario_folder_is_a_usage_error(tmp_path: Path) -> None:
    info = tmp_path / "broken-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[crashmatrix.faults]\nsnap = nowhere_at_all:SNAP\n")
    proc = subprocess.run([*CLI, "run", "--scenarios", SCENARIOS, "--scenario", "tiny",
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(tmp_path)}, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "fault 'snap' (nowhere_at_all:SNAP) failed to load" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = crashmatrix("repro", "tiny/none", "--scenarios", str(tmp_path / "missing"))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr


def test_out_never_replaces_files_crashmatrix_did_not_write(tmp_path: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "summary.md").write_text("my own notes\n")
    proc = tiny(out)
    assert proc.returncode == 2
    assert "no run.json says crashmatrix wrote them" in proc.stderr
    assert (out / "summary.md").read_text() == "my own notes\n"
    assert sorted(p.name for p in out.iterdir()) == ["summary.md"], "nothing written"
    # Ours to replace once a run of ours wrote there; or when told to.
    assert tiny(out, "--overwrite").returncode == 0
    assert tiny(out).returncode == 0
    proc = crashmatrix("merge", str(out), "--out", str(out))
    assert proc.returncode == 0, proc.stderr


# --- completeness, --resume and merge checks (run.json) ---------------------------------------


def run_json(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "run.json").read_text())
    return data


def verdicts(out: Path) -> dict[str, str]:
    return {r["case"]: r["verdict"] for r in results(out)}


def files(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.is_file()}


def interrupt_after(out: Path, keep: int) -> None:
    """Leave `out` as an interrupted run leaves it: its first results, run.json marked unfinished."""
    lines = (out / "results.jsonl").read_text().splitlines(keepends=True)
    (out / "results.jsonl").write_text("".join(lines[:keep]))
    data = run_json(out)
    data.update(expected=None, expected_total=None, done=keep, complete=False, ended="interrupted")
    (out / "run.json").write_text(json.dumps(data))


def test_run_json_records_the_options_the_expected_cases_and_completion(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = tiny(out, "--shard", "2/2", "--timeout", "30")
    assert proc.returncode == 0, proc.stderr
    n = len(results(out))
    data = run_json(out)
    assert {k: data[k] for k in ("agent", "depth", "fsync", "timeout", "spawn", "scenarios", "shard")} == {
        "agent": "durable-agent", "depth": 1, "fsync": False, "timeout": 30.0, "spawn": "fork",
        "scenarios": ["tiny"], "shard": "2/2"}
    assert data["expected"] == {"tiny": n}
    assert data["expected_total"] == data["done"] == data["known"] == n > 5
    assert (data["complete"], data["ended"]) == (True, "finished")
    assert sorted(p.name for p in out.iterdir() if p.name.endswith(".tmp")) == []


def test_report_on_an_interrupted_set_exits_3_and_says_it_is_incomplete(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert tiny(out).returncode == 0
    n = len(results(out))
    interrupt_after(out, 3)
    proc = crashmatrix("report", str(out))
    line = f"INCOMPLETE: 3 of at least {n} cases have results (the run was interrupted)"
    assert proc.returncode == 3, proc.stderr
    assert line in proc.stderr
    assert line in (out / "summary.md").read_text()
    assert line in (out / "report.html").read_text()


def test_resume_runs_only_the_missing_cases_and_equals_a_one_go_run(tmp_path: Path) -> None:
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert tiny(whole).returncode == 0
    assert tiny(part).returncode == 0
    interrupt_after(part, 4)
    kept = (part / "results.jsonl").read_text()
    proc = tiny(part, "--resume")
    assert proc.returncode == 0, proc.stderr
    after = (part / "results.jsonl").read_text()
    assert after.startswith(kept), "the saved lines are kept as they were"
    assert len(after.splitlines()) == len(results(whole)), "each case once: the saved ones not re-run"
    assert verdicts(part) == verdicts(whole)
    assert (run_json(part)["complete"], run_json(part)["expected"]) == (True, {"tiny": len(results(whole))})
    assert crashmatrix("report", str(part)).returncode == 0


def test_resume_after_a_real_sigint_finishes_the_matrix(tmp_path: Path) -> None:
    out, whole = tmp_path / "out", tmp_path / "whole"
    args = ["run", "--scenario", "changelog-fast", "--jobs", "1", "--out"]
    proc = subprocess.Popen([*CLI, *args, str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = interrupt_after_results(proc, out, 3, wait_s=120)
    assert proc.returncode == 3, stderr
    assert "INCOMPLETE: " in stdout.splitlines()[-1]
    assert "repeat the command with --resume" in stderr
    data = run_json(out)
    assert (data["complete"], data["ended"], data["done"]) == (False, "interrupted", len(results(out)))
    resumed = crashmatrix(*args, str(out), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert crashmatrix(*args, str(whole)).returncode == 0
    assert verdicts(out) == verdicts(whole)
    assert len(results(out)) == len(results(whole))
    assert run_json(out)["complete"] is True


def test_resume_with_other_options_or_nothing_to_resume_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert tiny(out).returncode == 0
    interrupt_after(out, 3)
    before = files(out)
    proc = tiny(out, "--resume", "--depth", "2", "--fsync", "on")
    assert proc.returncode == 2
    assert "depth is 1 there and 2 here; fsync is false there and true here" in proc.stderr
    assert files(out) == before, "nothing touched"
    proc = tiny(out, "--resume", "--max-events", "500")
    assert proc.returncode == 2
    assert "max_events is 10000 there and 500 here" in proc.stderr
    proc = tiny(tmp_path / "empty", "--resume")
    assert proc.returncode == 2
    assert "run.json does not exist, so there is no run to continue" in proc.stderr


def shards(tmp_path: Path, n: int, *ks: int) -> list[Path]:
    outs = []
    for k in ks:
        out = tmp_path / f"s{k}"
        proc = tiny(out, "--shard", f"{k}/{n}")
        assert proc.returncode == 0, proc.stderr
        outs.append(out)
    return outs


def test_merge_refuses_the_same_shard_twice(tmp_path: Path) -> None:
    s1, s2 = shards(tmp_path, 2, 1, 2)
    proc = crashmatrix("merge", str(s1), str(s2), str(s1 / "results.jsonl"), "--out", str(tmp_path / "m"))
    assert proc.returncode == 2
    assert f"{s1 / 'results.jsonl'} is given twice" in proc.stderr
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("results.jsonl", "run.json"):
        (copy / name).write_bytes((s1 / name).read_bytes())
    proc = crashmatrix("merge", str(s1), str(s2), str(copy), "--out", str(tmp_path / "m"))
    assert proc.returncode == 2
    assert (f"{s1 / 'results.jsonl'} and {copy / 'results.jsonl'} are the same shard (shard 1/2"
            in proc.stderr)
    assert not (tmp_path / "m").exists()


def test_merge_with_a_missing_shard_says_which_and_exits_3(tmp_path: Path) -> None:
    s1, s3 = shards(tmp_path, 3, 1, 3)
    merged = tmp_path / "m"
    proc = crashmatrix("merge", str(s1), str(s3), "--out", str(merged))
    assert proc.returncode == 3, proc.stderr
    assert "2 of 3 shards present; missing: 2/3" in proc.stderr
    assert "(shard 2/3 missing)" in proc.stdout
    assert set(verdicts(merged)) == set(verdicts(s1)) | set(verdicts(s3))
    assert (run_json(merged)["complete"], run_json(merged)["merged"]["missing"]) == (False, [2])
    report = crashmatrix("report", str(merged))
    assert report.returncode == 3
    assert "(shard 2/3 missing)" in report.stderr


def test_merge_does_not_call_a_shard_without_run_json_missing(tmp_path: Path) -> None:
    # A CI artifact may hold only results.jsonl: it may be any shard, so none is named missing.
    s1, s2 = shards(tmp_path, 2, 1, 2)
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "results.jsonl").write_bytes((s2 / "results.jsonl").read_bytes())
    merged = tmp_path / "m"
    proc = crashmatrix("merge", str(s1), str(bare), "--out", str(merged))
    assert proc.returncode == 0, proc.stderr
    assert "missing:" not in proc.stderr
    assert "INCOMPLETE" not in proc.stderr + proc.stdout
    assert "which are missing cannot be told" in proc.stderr
    assert run_json(merged)["complete"] is None
    assert set(verdicts(merged)) == set(verdicts(s1)) | set(verdicts(s2))


def test_merge_refuses_two_records_of_a_case_that_differ_in_trace(tmp_path: Path) -> None:
    (s1,) = shards(tmp_path, 2, 1)
    other = tmp_path / "other"
    other.mkdir()
    rows = results(s1)
    rows[1]["trace"][0].append("probe.extra:event")
    (other / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = crashmatrix("merge", str(s1), str(other), "--out", str(tmp_path / "m"))
    assert proc.returncode == 2
    assert f"no run.json beside {other / 'results.jsonl'}" in proc.stderr
    assert (f"case {rows[1]['case']} appears twice with different trace (in {s1 / 'results.jsonl'} and "
            f"{other / 'results.jsonl'})") in proc.stderr
    assert not (tmp_path / "m").exists()


def test_merge_refuses_shards_of_different_agents_or_options(tmp_path: Path) -> None:
    s1, s2 = shards(tmp_path, 2, 1, 2)
    data = run_json(s2)
    (s2 / "run.json").write_text(json.dumps({**data, "agent": "messages-only", "timeout": 5.0}))
    proc = crashmatrix("merge", str(s1), str(s2), "--out", str(tmp_path / "m"))
    assert proc.returncode == 2
    assert (f'agent is "durable-agent" in {s1 / "results.jsonl"} and "messages-only" in '
            f'{s2 / "results.jsonl"}; timeout is 60.0 in') in proc.stderr
    assert not (tmp_path / "m").exists()
