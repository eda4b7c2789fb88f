"""at-most-once: a never-replay call takes effect at most once, judged from the workspace first."""

from __future__ import annotations

import posixpath
from collections import defaultdict

from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.records.violation import InvariantId, Violation
from crashmatrix.harness.verify.calls import CallSite, CallTable, call_table_of
from crashmatrix.harness.verify.effects import befores, site_effects_of, site_policy
from crashmatrix.harness.verify.trace import Trace
from crashmatrix.scenarios.model import Policy, Scenario, ToolName, count_lines

ID = InvariantId.AT_MOST_ONCE
RULE = "a never-replay call may take effect at most once"
# Scenarios make effects countable: a command that writes `.witness/NAME` adds one line per
# real run, whatever the agent's probes claim.
WITNESS_DIR = ".witness/"


def check_at_most_once(obs: Observation, scenario: Scenario) -> list[Violation]:
    table = call_table_of(Trace.of(obs))
    flagged: set[int] = set()
    out = _appended_lines(obs, table, flagged) + _witness_lines(obs, table, flagged)
    out += _repeated_effects(obs, table, flagged)
    return out


def _norm(path: str) -> str:
    return posixpath.normpath(path)


def _line_numbers(text: str | None, line: str) -> list[int]:
    return [k for k, got in enumerate((text or "").splitlines(), start=1) if got == line]


def _ids(sites: list[CallSite]) -> str:
    return ", ".join(s.call_id for s in sites) or "none"


def _appended_lines(obs: Observation, table: CallTable, flagged: set[int]) -> list[Violation]:
    wanted: dict[tuple[str, str], list[CallSite]] = defaultdict(list)
    for s in table.of_tool(ToolName.APPEND_NOTE):
        path, line = s.arg("path"), s.arg("line")
        if path is not None and line is not None:
            wanted[(_norm(path), line.rstrip("\n"))].append(s)
    out: list[Violation] = []
    for (path, line), sites in sorted(wanted.items()):
        grew = count_lines(obs.workspace_after.get(path), line) - count_lines(
            obs.workspace_before.get(path), line)
        # A write or edit of the same file may legitimately put the line there too.
        other = sum(count_lines(s.arg("content"), line) for s in table.of_tool(ToolName.WRITE)
                    if _norm(s.arg("path") or "") == path)
        other += sum(count_lines(s.arg("new"), line) for s in table.of_tool(ToolName.EDIT)
                     if _norm(s.arg("path") or "") == path)
        if grew <= len(sites) + other:
            continue
        lines = _line_numbers(obs.workspace_after.get(path), line)
        shown = ", ".join(str(n) for n in lines)
        if len(sites) == 1 and not other:
            msg = (f"{sites[0].name} took effect {grew} times: {path} gained {grew} lines "
                   f"{line!r} (now at lines {shown}); {RULE}")
        else:
            msg = (f"{path} gained {grew} lines {line!r} (now at lines {shown}), but only "
                   f"{len(sites)} append_note call(s) asked for it ({_ids(sites)}); {RULE}")
        flagged.update(s.index for s in sites)
        out.append(Violation(ID, msg, {
            "path": path, "line": line, "added": grew, "allowed": len(sites) + other,
            "call_ids": [s.call_id for s in sites], "file_lines": lines}))
    return out


def _witness_lines(obs: Observation, table: CallTable, flagged: set[int]) -> list[Violation]:
    out: list[Violation] = []
    for path in sorted(obs.workspace_after):
        if not _norm(path).startswith(WITNESS_DIR):
            continue
        runs = len(obs.workspace_after[path].splitlines()) - len(
            (obs.workspace_before.get(path) or "").splitlines())
        sites = [s for s in table.of_tool(ToolName.BASH) if path in (s.arg("command") or "")]
        if runs <= len(sites):
            continue
        if len(sites) == 1:
            msg = (f"{sites[0].name} ran {runs} times: its witness {path} has {runs} new lines; "
                   f"{RULE}")
        else:
            msg = (f"witness {path} records {runs} runs of its command, but only {len(sites)} bash "
                   f"call(s) mention it ({_ids(sites)}); {RULE}")
        flagged.update(s.index for s in sites)
        out.append(Violation(ID, msg, {"path": path, "runs": runs, "allowed": len(sites),
                                       "call_ids": [s.call_id for s in sites]}))
    return out


def _repeated_effects(obs: Observation, table: CallTable, flagged: set[int]) -> list[Violation]:
    """The trace's view: catches doubles the workspace cannot show (e.g. a write of equal text)."""
    trace = Trace.of(obs)
    effects = site_effects_of(trace)  # of the same table: both are the judged transcript's
    out: list[Violation] = []
    for s in table.sites:
        ran = befores(effects[s.index])
        if len(ran) <= 1 or s.index in flagged:
            continue
        recorded_never = s.start is not None and s.start.replay == Policy.NEVER
        registered_never = site_policy(s, trace, ran[0].inc) == Policy.NEVER
        if not (recorded_never or registered_never):
            continue
        shown = ", ".join(e.text for e in ran)
        out.append(Violation(ID, f"{s.name} took effect {len(ran)} times ({shown}); {RULE}", {
            "call_id": s.call_id, "tool": s.tool, "events": [e.ref for e in ran],
            "replay": s.start.replay if s.start else None}))
    return out
