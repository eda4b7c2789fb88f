"""Case results: one JSON record per case, appended to results.jsonl as cases finish."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import msgspec

from crashmatrix.harness.records.atomic import replace_file


class Verdict(StrEnum):
    PASS = "pass"
    FAIL = "fail"  # an invariant was violated
    NONDETERMINISTIC = "nondeterministic"  # the crash point was not the recorded event
    ERROR = "error"  # the harness itself failed on this case
    # The scenario, not the agent, is wrong: its script has no rule for a request the agent made,
    # or it never lets the conversation end. `CaseResult.scenario_error` holds the cause.
    SCENARIO_ERROR = "scenario-error"


RESULTS_FILE = "results.jsonl"
# The agent a run tests unless told otherwise (an adapter registered under this name).
DEFAULT_AGENT = "durable-agent"
# The step bound (`--max-events`): probe events one incarnation may emit before the harness kills
# it as a runaway. A built-in scenario's incarnation emits under 100; the reference agent's own
# step limit (100 model replies) ends a run within about 1,500. Ten thousand leaves an agent of
# your own room for long tasks and still ends a loop in seconds, long before the case deadline.
DEFAULT_MAX_EVENTS = 10_000
# The case deadline (`--timeout`, seconds): a case still running then is killed, its verdict says so.
DEFAULT_TIMEOUT_S = 60.0


class ResultsError(Exception):
    """A results file is missing, empty or damaged; names the file and line."""


@dataclass
class CaseResult:
    case: str
    scenario: str
    depth: int
    verdict: Verdict
    violations: list[dict[str, Any]] = field(default_factory=list)
    branches: list[str] = field(default_factory=list)
    trace: list[list[str]] = field(default_factory=list)  # kind:label per event, per incarnation
    crashed_at: list[int | None] = field(default_factory=list)
    # Black-box mode (`--black-box`): the store calls each incarnation was seen to make, as
    # `syscall:file` (only a traced recording's are listed; [] elsewhere and in probe mode).
    store_calls: list[list[str]] = field(default_factory=list)
    # --syscalls: the store calls of each incarnation traced with its probes on (the recording's
    # first, a case's finishing one, and the settle after either; [] for the others),
    # `SAME`-marked where a probe event's kill stands for the call (blackbox.store_points): the
    # system-call points a deeper case takes.
    syscall_points: list[list[str]] = field(default_factory=list)
    # The variants the fault of its last step offered there (`power-subsets`: a mask per subset
    # of the unsynced blocks): each a sibling case, the same schedule with the last step's variant.
    variants: list[str] = field(default_factory=list)
    # Downstream requests each incarnation made, as `kind:service` (create:mail): the crash points
    # of the downstream faults ([] for a scenario with no services).
    downstream: list[list[str]] = field(default_factory=list)
    exit_codes: list[int | None] = field(default_factory=list)
    requests: int = 0
    commits: int = 0
    duration_ms: float = 0.0
    incarnation_ms: list[float] = field(default_factory=list)
    fsync: bool = False
    agent: str = DEFAULT_AGENT
    repro: str = ""
    note: str | None = None
    # Invariants that could not be judged for this agent, with why: {"invariant", "reason"}.
    not_applicable: list[dict[str, str]] = field(default_factory=list)
    # The invariants whose situation arose in this case (harness/verify/exercised.py); one that
    # was judged but never exercised held vacuously. None: a record from before it was recorded.
    exercised: list[str] | None = None
    # The scenario mistake the case ran into, if any: {"kind": "script-gap" | "script-loop",
    # "message", "fix", ...evidence} (harness/verify/scenario_error.py). With verdict
    # scenario-error it is the whole verdict; beside a `fail`, a note on what else went wrong.
    scenario_error: dict[str, Any] | None = None
    # What `repro` would show, for a case whose verdict is not `pass` (None for a pass, so a green
    # results.jsonl stays small): incarnations and their events, provider requests with the
    # history sent, deliveries, the store's commits, the files that changed (records/evidence.py).
    evidence: dict[str, Any] | None = None
    # The replay policy of each tool the scenario enables, as the harness registered it for the
    # case's first incarnation, with `, restart P` where recoveries had another: what safe-rerun
    # and at-most-once judged against, printed in every summary. None: a record from before.
    policies: dict[str, str] | None = None
    # The end of what each incarnation printed (stdout and stderr), for a case whose verdict is
    # not `pass` (None for a pass, and in a record from before it was kept): per incarnation that
    # printed anything, {"incarnation": N, "tail": its last lines}, secrets redacted
    # (records/output_tail.py). An agent that cannot start says why here and nowhere else.
    agent_output: list[dict[str, Any]] | None = None

    @property
    def invariants(self) -> list[str]:
        return sorted({v["invariant"] for v in self.violations})

    @property
    def ok(self) -> bool:
        return self.verdict is Verdict.PASS

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["verdict"] = self.verdict.value
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CaseResult:
        known = {f for f in cls.__dataclass_fields__}
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["verdict"] = Verdict(data["verdict"])
        return cls(**kwargs)


def _line(result: CaseResult) -> str:
    # msgspec encodes the dataclass as it is, keys sorted, text as UTF-8: the same object as
    # json.dumps(to_json(), sort_keys=True) gives, compact, at a fifth of the cost (writing
    # results was a tenth of the harness's own time in a deep --states matrix); a NaN becomes
    # null, which is JSON (json.dumps wrote NaN, which is not). It refuses a mapping whose keys
    # are not text: such a result is written the old way.
    try:
        return _ENCODER.encode(result).decode("utf-8") + "\n"
    except TypeError:
        return json.dumps(result.to_json(), ensure_ascii=False, sort_keys=True) + "\n"


_ENCODER = msgspec.json.Encoder(order="sorted")


class ResultsWriter:
    """Appends results as they finish; each line is written whole so an interrupted run keeps them.

    `append`: keep the lines already in the file (a resumed run adds to them). A line the disk
    had no room for is taken back (the file cut to where it was), so a full disk leaves whole
    lines only, and `report` and `--resume` read the file as it is: the error (OSError, ENOSPC)
    goes to the caller, which stops the run.
    """

    def __init__(self, path: Path, append: bool = False) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | (0 if append else os.O_TRUNC), 0o644)
        self._end = os.lseek(self._fd, 0, os.SEEK_END)
        if append and self._end:
            torn = _torn_tail(path)
            if torn:
                # The last line of a run that stopped mid-write is no result: cut it off, and
                # its case runs again.
                self._end -= torn
                os.ftruncate(self._fd, self._end)
            elif not _ends_with_newline(path):
                # A whole result without its newline would swallow the first new line.
                self._end += os.pwrite(self._fd, b"\n", self._end)

    def write(self, result: CaseResult) -> None:
        data = _line(result).encode("utf-8")
        done = 0
        try:
            while done < len(data):
                done += os.pwrite(self._fd, data[done:], self._end + done)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._end)
            raise OSError(exc.errno, exc.strerror, str(self.path)) from exc
        self._end += len(data)

    def close(self) -> None:
        if self._fd < 0:
            return
        try:
            os.fsync(self._fd)
        finally:
            os.close(self._fd)
            self._fd = -1


def whole_lines(path: Path) -> list[bytes]:
    """The lines of a results file, without a torn last one (a run stopped mid-write, by a full
    disk or a kill: the case it was for has no result and runs again on --resume)."""
    with path.open("rb") as f:
        data = f.read()
    torn = _torn_tail(path)
    return (data[:len(data) - torn] if torn else data).splitlines(keepends=True)


def _torn_tail(path: Path) -> int:
    """How many bytes at the end of `path` are a line without its newline that is no result."""
    with path.open("rb") as f:
        size = f.seek(0, os.SEEK_END)
        back = min(size, 1 << 20)
        f.seek(size - back)
        tail = f.read(back)
    if tail.endswith(b"\n"):
        return 0
    last = tail[tail.rfind(b"\n") + 1:]
    try:
        CaseResult.from_json(json.loads(last))
    except (ValueError, KeyError, TypeError):
        return len(last)
    return 0  # a whole result without its newline (a hand edit): kept


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def write_results(path: Path, results: Iterable[CaseResult]) -> None:
    """Replace a results file atomically (tmp + rename): an input merged into itself is never lost."""
    replace_file(path, (_line(r) for r in results))


def resolve_results_path(path: Path) -> Path:
    return path / RESULTS_FILE if path.is_dir() else path


def load(path: Path) -> list[CaseResult]:
    path = resolve_results_path(path)
    if not path.exists():
        raise ResultsError(f"{path}: no such results file")
    out: list[CaseResult] = []
    for line_no, raw in enumerate(whole_lines(path), 1):
        line = raw.decode("utf-8")
        if not line.strip():
            continue
        try:
            out.append(CaseResult.from_json(json.loads(line)))
        except (ValueError, KeyError, TypeError) as exc:
            raise ResultsError(f"{path}: line {line_no}: not a case result ({exc})") from None
    if not out:
        raise ResultsError(f"{path}: holds no case results")
    return out


# Measurements, not outcomes: the same case run twice differs in them and nothing else.
TIMING_FIELDS = frozenset({"duration_ms", "incarnation_ms"})
# The agent's own words, not the harness's: what it prints may hold a clock time, a pid or an
# address, which differ between two runs of one case, and no verdict rests on them.
AGENT_WORDS_FIELDS = frozenset({"agent_output"})


def differences(a: CaseResult, b: CaseResult) -> list[str]:
    """The fields (other than timings and the agent's own output) in which two records of one
    case differ."""
    da, db = a.to_json(), b.to_json()
    ignored = TIMING_FIELDS | AGENT_WORDS_FIELDS
    return [k for k in da if k not in ignored and da[k] != db.get(k)]


def merge(groups: Iterable[list[CaseResult]], names: Sequence[str] | None = None) -> list[CaseResult]:
    """Combine shard results. A case present twice must be the same record (timings aside): two
    different records of one case cannot both be right, and keeping either would hide the other.
    `names`: what to call each group in an error (its file)."""
    by_case: dict[str, tuple[CaseResult, int]] = {}
    for i, results in enumerate(groups):
        for r in results:
            seen = by_case.get(r.case)
            if seen is None:
                by_case[r.case] = (r, i)
                continue
            old, j = seen
            differ = differences(old, r)
            if not differ:
                continue
            where = f" (in {names[j]} and {names[i]})" if names is not None else ""
            if "verdict" in differ:
                raise ResultsError(f"case {r.case} appears twice with different verdicts "
                                   f"({old.verdict.value}, {r.verdict.value}){where}")
            raise ResultsError(f"case {r.case} appears twice with different {', '.join(differ)}{where}")
    return sorted((r for r, _ in by_case.values()), key=lambda r: (r.scenario, r.depth, r.case))


def summary(results: list[CaseResult], out: str | None = None) -> dict[str, Any]:
    """The `--json` summary object (documented in the README)."""
    scenarios: dict[str, dict[str, int]] = {}
    for r in results:
        s = scenarios.setdefault(r.scenario, {"cases": 0, "passed": 0, "failed": 0})
        s["cases"] += 1
        s["passed" if r.ok else "failed"] += 1
    failures = [{"case": r.case, "verdict": r.verdict.value, "invariants": r.invariants,
                 "repro": r.repro, **({"cause": r.scenario_error.get("message")}
                                      if r.scenario_error else {})}
                for r in results if not r.ok]
    return {
        "cases": len(results),
        "passed": sum(1 for r in results if r.ok),
        "failed": sum(1 for r in results if not r.ok),
        "scenario_errors": sum(1 for r in results if r.verdict is Verdict.SCENARIO_ERROR),
        "scenarios": scenarios,
        "failures": failures,
        "not_applicable": not_applicable(results),
        "out": out,
    }


def not_applicable(results: Iterable[CaseResult]) -> dict[str, str]:
    """Invariant -> why it was not judged, over all results (the same for every case of an agent)."""
    out: dict[str, str] = {}
    for r in results:
        for item in r.not_applicable:
            # An invariant judged in part says so first: its other verdicts are real ones.
            reason = (f"partly judged; not judged: {item['reason']}" if item.get("partly")
                      else item["reason"])
            out.setdefault(item["invariant"], reason)
    return dict(sorted(out.items()))
