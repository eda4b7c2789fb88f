"""run.json: what a run was asked to do, the cases it expects, and whether its results are complete."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeGuard

from crashmatrix.harness.records.atomic import replace_file
from crashmatrix.harness.records.results import CaseResult, ResultsError

RUN_FILE = "run.json"
# 1 (no "format" key): agent, declared branches and most options, nothing about completeness.
FORMAT = 2


class RunFileError(ResultsError):
    """A run.json that cannot be read as a run description; names the file and the field."""


class RunEnd(StrEnum):
    FINISHED = "finished"  # the matrix ran every case it enumerated
    INTERRUPTED = "interrupted"  # stopped by SIGINT or SIGTERM; the finished cases are kept


class Completion(StrEnum):
    COMPLETE = "complete"  # every expected case has a result
    INCOMPLETE = "incomplete"  # some expected cases have none
    UNKNOWN = "unknown"  # nothing records how many cases were expected


@dataclass(frozen=True)
class RunOptions:
    """The options that change which cases run or their verdicts. None: not recorded (older
    run.json files lack some), except `shard`, where None is the whole matrix."""

    agent: str | None = None
    depth: int | None = None
    fsync: bool | None = None
    timeout: float | None = None
    spawn: str | None = None
    max_events: int | None = None  # the step bound: a lower one turns long runs into verdicts
    scenarios: tuple[str, ...] | None = None
    shard: str | None = None  # "K/N"
    faults: tuple[str, ...] | None = None  # as selected with --fault; None: the default set
    # Crash points at store calls, the agent without probes (`--black-box`); older files: False
    # (before the option existed, every run crashed at probe events).
    blackbox: bool = False
    # Cases started from recorded crash states (`--states`); older files: False.
    states: bool = False
    # Only these crash cases, by id (`--case`); None: every case of the matrix.
    cases: tuple[str, ...] | None = None
    # What `--line-coverage` measures, as `--line-coverage-source` named it; None: the adapter's
    # own guess (older files: None, the only choice there was).
    line_coverage_source: tuple[str, ...] | None = None
    # Each input and cancel also delivered at every kind of point (`--arrivals`); older files:
    # False (before the option existed, each item arrived where its scenario said only).
    arrivals: bool = False
    # System-call crash points with probes on (`--syscalls`); older files: False (before the
    # option existed, no case crashed at a system call with its probes attached).
    syscalls: bool = False
    # With `syscalls`: the settles were traced too, their calls crash points (`fNN` steps); older
    # files: False (a --syscalls run made before lists no settle's calls: resuming it would add
    # none, so the difference refuses it).
    syscall_settles: bool = False

    def differences(self, other: RunOptions, ignore: Sequence[str] = ()) -> list[tuple[str, object, object]]:
        """(field, ours, theirs) for each field both record with different values."""
        out: list[tuple[str, object, object]] = []
        for f in fields(self):
            ours, theirs = getattr(self, f.name), getattr(other, f.name)
            if f.name in ignore or ours == theirs:
                continue
            if f.name not in _NONE_MEANS_DEFAULT and (ours is None or theirs is None):
                continue  # one side did not record it: nothing to compare
            out.append((f.name, ours, theirs))
        return out

    def unrecorded(self) -> list[str]:
        return [f.name for f in fields(self)
                if f.name not in _NONE_MEANS_DEFAULT and getattr(self, f.name) is None]


# Fields where None is a value (the whole matrix, the default faults), not "not recorded".
_NONE_MEANS_DEFAULT = ("shard", "faults", "cases", "line_coverage_source")


@dataclass(frozen=True)
class Shards:
    """Which shards of an N-way split a merged result set holds."""

    of: int
    present: tuple[int, ...]
    incomplete: tuple[int, ...] = ()  # present, but their results are not all there
    unchecked: int = 0  # inputs whose completeness nothing recorded (no run.json, or an older one)

    @property
    def missing(self) -> tuple[int, ...]:
        """Shards not given; none can be named while an input said nothing of its shard (it may
        be any of them: a CI artifact holding only results.jsonl)."""
        if self.unchecked:
            return ()
        return tuple(k for k in range(1, self.of + 1) if k not in self.present)


@dataclass(frozen=True)
class LineCoverageRecord:
    """What `run --line-coverage` measured: the total, where its HTML is (relative to run.json's
    directory, so a moved or downloaded output folder still links to it), from how many
    recovery incarnations, and of what (the package or directory; None in older files)."""

    percent: float
    html: str
    recoveries: int
    source: str | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"percent": self.percent, "html": self.html, "recoveries": self.recoveries}
        if self.source is not None:
            data["source"] = self.source
        return data


@dataclass(frozen=True)
class ScenarioStates:
    """One scenario's crash points run from recorded states, and the distinct states they mapped
    to; its second-process (FREEZE) points, and the hosts that served them."""

    points: int
    states: int
    second_process_points: int = 0
    hosts: int = 0

    def to_json(self) -> dict[str, int]:
        return {"points": self.points, "states": self.states,
                "second_process_points": self.second_process_points, "hosts": self.hosts}


@dataclass(frozen=True)
class StatesRecord:
    """What `run --states` shared: per scenario, how many crash points mapped to how many states,
    and the settle runs a byte-identical final state made unnecessary. Counts only the cases this
    invocation ran: `resumed` cases kept from the run it continued are in none of them."""

    scenarios: Mapping[str, ScenarioStates]
    settles_reused: int = 0
    resumed: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"scenarios": {name: s.to_json() for name, s in sorted(self.scenarios.items())},
                "settles_reused": self.settles_reused, "resumed": self.resumed}


@dataclass(frozen=True)
class RunRecord:
    declared_branches: tuple[str, ...]
    options: RunOptions = RunOptions()
    expected: Mapping[str, int] | None = None  # cases per scenario, once enumeration finished
    known: int | None = None  # cases enumerated when last written: a lower bound of the total
    done: int | None = None  # cases with a result
    complete: bool | None = None  # None: an older run.json, which did not say
    ended: RunEnd | None = None  # None: the run has not recorded an end (running, or killed)
    shards: Shards | None = None  # set by `merge`
    format: int = FORMAT
    line_coverage: LineCoverageRecord | None = None  # set by `run --line-coverage` when it measured
    # Set by `run --line-coverage` when it measured nothing: why, and what to do (never silent).
    line_coverage_unmeasured: str | None = None
    # Set by `run --states`. Not under "states", the key of the option (true or false).
    crash_states: StatesRecord | None = None
    # What the agents could reach beyond the fakes, and why (harness/execution/netns.py): None
    # when their network namespace had loopback only, or for a run.json older than the field.
    network_exposed: str | None = None
    # The agent tested, as its adapter says (harness/adapters/identity.py); None in older files.
    agent_origin: str | None = None
    agent_framework: str | None = None

    @property
    def expected_total(self) -> int | None:
        return None if self.expected is None else sum(self.expected.values())

    def to_json(self) -> dict[str, Any]:
        o = self.options
        data: dict[str, Any] = {
            "format": self.format, "agent": o.agent, "declared_branches": list(self.declared_branches),
            "depth": o.depth, "fsync": o.fsync, "timeout": o.timeout, "spawn": o.spawn,
            "max_events": o.max_events,
            "scenarios": None if o.scenarios is None else list(o.scenarios), "shard": o.shard,
            "faults": None if o.faults is None else list(o.faults), "blackbox": o.blackbox,
            "states": o.states, "arrivals": o.arrivals, "syscalls": o.syscalls,
            "syscall_settles": o.syscall_settles,
            "cases": None if o.cases is None else list(o.cases),
            "line_coverage_source": (None if o.line_coverage_source is None
                                     else list(o.line_coverage_source)),
            "expected": None if self.expected is None else dict(self.expected),
            "expected_total": self.expected_total, "known": self.known, "done": self.done,
            "complete": self.complete, "ended": None if self.ended is None else self.ended.value,
            "network_exposed": self.network_exposed,
            "agent_origin": self.agent_origin, "agent_framework": self.agent_framework,
        }
        if self.line_coverage is not None:
            data["line_coverage"] = self.line_coverage.to_json()
        if self.line_coverage_unmeasured is not None:
            data["line_coverage_unmeasured"] = self.line_coverage_unmeasured
        if self.crash_states is not None:
            data["crash_states"] = self.crash_states.to_json()
        if self.shards is not None:
            s = self.shards
            data["merged"] = {"of": s.of, "present": list(s.present), "missing": list(s.missing),
                              "incomplete": list(s.incomplete), "unchecked": s.unchecked}
        return data

    @classmethod
    def from_json(cls, data: object, path: Path) -> RunRecord:
        """Read a run description, old or new; anything of the wrong type is named by field."""
        if not isinstance(data, dict):
            raise RunFileError(f"{path}: not a run description (expected a JSON object)")
        get = _Fields(data, path)
        branches = get("declared_branches", is_str_list, "a list of strings", required=True)
        scenarios = get("scenarios", is_str_list, "a list of strings")
        faults = get("faults", is_str_list, "a list of strings, or null")
        cases = get("cases", is_str_list, "a list of case ids, or null")
        sources = get("line_coverage_source", is_str_list, "a list of strings, or null")
        expected = get("expected", _is_counts, "an object of case counts")
        merged = get("merged", lambda v: isinstance(v, dict), "an object")
        lines = get("line_coverage", lambda v: isinstance(v, dict), "an object")
        crash_states = get("crash_states", lambda v: isinstance(v, dict), "an object")
        ended = get("ended", lambda v: v in {e.value for e in RunEnd},
                    "one of " + ", ".join(e.value for e in RunEnd))
        record = cls(
            declared_branches=tuple(branches),
            options=RunOptions(
                agent=get("agent", _is_str, "a string"),
                depth=get("depth", _is_int, "an integer"),
                fsync=get("fsync", _is_bool, "true or false"),
                timeout=_float(get("timeout", _is_number, "a number")),
                spawn=get("spawn", _is_str, "a string"),
                max_events=get("max_events", _is_count, "a count"),
                scenarios=None if scenarios is None else tuple(scenarios),
                shard=get("shard", _is_str, "a string K/N, or null"),
                faults=None if faults is None else tuple(faults),
                blackbox=bool(get("blackbox", _is_bool, "true or false")),
                states=bool(get("states", _is_bool, "true or false")),
                arrivals=bool(get("arrivals", _is_bool, "true or false")),
                syscalls=bool(get("syscalls", _is_bool, "true or false")),
                syscall_settles=bool(get("syscall_settles", _is_bool, "true or false")),
                cases=None if cases is None else tuple(cases),
                line_coverage_source=None if sources is None else tuple(sources)),
            expected=expected,
            known=get("known", _is_count, "a count"),
            done=get("done", _is_count, "a count"),
            complete=get("complete", _is_bool, "true or false"),
            ended=None if ended is None else RunEnd(ended),
            shards=None if merged is None else _shards(merged, path),
            format=get("format", _is_int, "an integer") or 1,
            line_coverage=None if lines is None else _line_coverage(lines, path),
            line_coverage_unmeasured=get("line_coverage_unmeasured", _is_str, "a string, or null"),
            crash_states=None if crash_states is None else _crash_states(crash_states, path),
            network_exposed=get("network_exposed", _is_str, "a string, or null"),
            agent_origin=get("agent_origin", _is_str, "a string, or null"),
            agent_framework=get("agent_framework", _is_str, "a string, or null"))
        if record.complete and record.expected is None:
            raise RunFileError(f"{path}: complete is true, but expected gives no case counts")
        return record


def _is_str(v: object) -> bool:
    return isinstance(v, str)


def _is_bool(v: object) -> bool:
    return isinstance(v, bool)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_count(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def is_str_list(v: object) -> TypeGuard[list[str]]:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _is_counts(v: object) -> bool:
    return isinstance(v, dict) and all(isinstance(k, str) and _is_count(n) for k, n in v.items())


def _is_count_list(v: object) -> bool:
    return isinstance(v, list) and all(_is_count(x) for x in v)


def _float(v: Any) -> float | None:
    return None if v is None else float(v)


class _Fields:
    """Reads one field at a time, raising an error that names the file and the field."""

    def __init__(self, data: dict[str, Any], path: Path, prefix: str = "") -> None:
        self.data, self.path, self.prefix = data, path, prefix

    def __call__(self, name: str, check: Callable[[object], bool], what: str, required: bool = False) -> Any:
        value = self.data.get(name)
        if value is None and not required:
            return None
        if not check(value):
            raise RunFileError(f"{self.path}: {self.prefix}{name} must be {what}")
        return value


def _shards(data: dict[str, Any], path: Path) -> Shards:
    get = _Fields(data, path, "merged.")
    return Shards(of=get("of", _is_count, "a count", required=True),
                  present=tuple(get("present", _is_count_list, "a list of shard numbers", required=True)),
                  incomplete=tuple(get("incomplete", _is_count_list, "a list of shard numbers") or ()),
                  unchecked=get("unchecked", _is_count, "a count") or 0)


def _line_coverage(data: dict[str, Any], path: Path) -> LineCoverageRecord:
    get = _Fields(data, path, "line_coverage.")
    return LineCoverageRecord(percent=float(get("percent", _is_number, "a number", required=True)),
                              html=get("html", _is_str, "a string", required=True),
                              recoveries=get("recoveries", _is_count, "a count", required=True),
                              source=get("source", _is_str, "a string, or null"))


def _crash_states(data: dict[str, Any], path: Path) -> StatesRecord:
    get = _Fields(data, path, "crash_states.")
    scenarios = get("scenarios", lambda v: isinstance(v, dict), "an object", required=True)
    per: dict[str, ScenarioStates] = {}
    for name, counts in scenarios.items():
        if not isinstance(counts, dict):
            raise RunFileError(f"{path}: crash_states.scenarios.{name} must be an object")
        one = _Fields(counts, path, f"crash_states.scenarios.{name}.")
        per[name] = ScenarioStates(
            points=one("points", _is_count, "a count", required=True),
            states=one("states", _is_count, "a count", required=True),
            second_process_points=one("second_process_points", _is_count, "a count", required=True),
            hosts=one("hosts", _is_count, "a count", required=True))
    return StatesRecord(scenarios=per,
                        settles_reused=get("settles_reused", _is_count, "a count", required=True),
                        resumed=get("resumed", _is_count, "a count", required=True))


def run_file_for(results_path: Path) -> Path:
    """The run.json that describes a results file: the one beside it."""
    return results_path.parent / RUN_FILE


def run_notes(record: RunRecord | None) -> list[str]:
    """What every report of a run says above its counts, beside its completeness: what the run
    could not promise (agents not isolated from the network; line coverage asked for, but none
    measured)."""
    if record is None:
        return []
    notes = []
    if record.network_exposed is not None:
        notes.append(f"Agents were not network-isolated: {record.network_exposed}. They could reach "
                     "whatever this machine can, real endpoints with real keys included.")
    if record.line_coverage_unmeasured is not None:
        notes.append(f"--line-coverage measured nothing: {record.line_coverage_unmeasured}.")
    return notes


def read_run(path: Path) -> RunRecord | None:
    """The run description at `path`, or None when there is none."""
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunFileError(f"{path}: not a run description ({exc})") from None
    return RunRecord.from_json(data, path)


def write_run(path: Path, record: RunRecord) -> None:
    """Replace run.json atomically: a reader (or a crash) sees the old description or the new one."""
    replace_file(path, [json.dumps(record.to_json(), indent=2) + "\n"])


@dataclass(frozen=True)
class Completeness:
    """Whether a result set holds every case its run expected: the data renderers show."""

    state: Completion
    have: int  # cases with a result
    expected: int | None = None  # the exact number expected, when known
    at_least: int | None = None  # else a lower bound, when one is known
    why: str = ""

    @property
    def line(self) -> str | None:
        """The line reports and commands show; None when complete (nothing to warn about)."""
        if self.state is Completion.COMPLETE:
            return None
        if self.state is Completion.UNKNOWN:
            return f"completeness unknown: {self.have} cases have results; {self.why}"
        if self.expected is not None:
            return f"INCOMPLETE: {self.have} of {self.expected} cases have results ({self.why})"
        if self.at_least is not None:
            return f"INCOMPLETE: {self.have} of at least {self.at_least} cases have results ({self.why})"
        return f"INCOMPLETE: {self.have} cases have results, of a number not yet known ({self.why})"


def _numbers(ks: Sequence[int], of: int) -> str:
    return ", ".join(f"{k}/{of}" for k in ks)


def _why_incomplete(record: RunRecord) -> str:
    if record.shards is not None:
        s = record.shards
        parts = []
        if s.missing:
            parts.append(f"shard{'s' if len(s.missing) > 1 else ''} {_numbers(s.missing, s.of)} missing")
        if s.incomplete:
            parts.append(f"shard{'s' if len(s.incomplete) > 1 else ''} {_numbers(s.incomplete, s.of)} "
                         "incomplete")
        return "; ".join(parts) or "run.json marks the merged results incomplete"
    if record.ended is RunEnd.INTERRUPTED:
        return "the run was interrupted"
    if record.ended is None:
        return "the run recorded no end: it was killed, failed, or is still running"
    return "run.json marks the run incomplete"


def judge(record: RunRecord | None, results: Sequence[CaseResult]) -> Completeness:
    """Compare the results with what their run.json expects. Pure."""
    by_case = {r.case: r.scenario for r in results}
    have = len(by_case)
    if record is None:
        return Completeness(Completion.UNKNOWN, have,
                            why="no run.json beside the results records how many cases were expected")
    if record.complete is None:
        why = (f"{record.shards.unchecked} merged input(s) had no run.json saying whether they were complete"
               if record.shards is not None and record.shards.unchecked
               else "run.json records no expected case count (written by an older crashmatrix)")
        return Completeness(Completion.UNKNOWN, have, why=why)
    if not record.complete:
        # A floor no higher than what is there says nothing (a merge missing whole shards).
        at_least = record.known if record.known is not None and record.known > have else None
        return Completeness(Completion.INCOMPLETE, have, record.expected_total, at_least,
                            _why_incomplete(record))
    expected = record.expected or {}
    counts = Counter(by_case.values())
    short = [f"{s}: {counts.get(s, 0)} of {n}" for s, n in sorted(expected.items()) if counts.get(s, 0) < n]
    if short:
        return Completeness(Completion.INCOMPLETE, have, record.expected_total,
                            why="results.jsonl holds fewer results than run.json expects ("
                                + "; ".join(short) + ")")
    extra = [f"{s}: {n} of {expected.get(s, 0)}" for s, n in sorted(counts.items())
             if n > expected.get(s, 0)]
    if extra:
        return Completeness(Completion.UNKNOWN, have,
                            why="results.jsonl holds more results than run.json expects ("
                                + "; ".join(extra) + ")")
    return Completeness(Completion.COMPLETE, have, record.expected_total)
