"""at-most-once: a call takes effect at most once, judged from the world first, then from probes.

The world: lines `append_note` asked for, `.witness/` lines of `bash` commands, the effects a
scenario's oracles name with `tool` (records, matching lines), and the operations a downstream
service applied for a `tool` (its own record, after key dedup), each counted once per real change
and charged to the calls of the tool that makes it. The probes: an `effect.before` per run of a
tool, which catches what the world cannot show (a write of equal text), for a call whose policy
is `never`, or `idempotent` where no oracle shows its effect (a repeat the world shows as one
effect is what an idempotent tool promises, so there it is not a violation).
"""

from __future__ import annotations

import posixpath
from collections import defaultdict

from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.records.violation import InvariantId, Violation
from crashmatrix.harness.verify.calls import CallSite, CallTable, call_table_of, contradicts
from crashmatrix.harness.verify.downstream import service_calls
from crashmatrix.harness.verify.effects import befores, site_effects_of, site_policy
from crashmatrix.harness.verify.trace import Trace
from crashmatrix.scenarios.model import (
    PatternRule,
    Policy,
    RecordRule,
    Scenario,
    Service,
    ToolName,
    count_lines,
)

ID = InvariantId.AT_MOST_ONCE
RULE = "a never-replay call may take effect at most once"
EACH = "each call may take effect at most once"  # the rule where the world shows the effects
IDEMPOTENT_RULE = "an idempotent call may run again only where the world shows it took effect once"
# Scenarios make effects countable: a command that writes `.witness/NAME` adds one line per
# real run, whatever the agent's probes claim.
WITNESS_DIR = ".witness/"


def check_at_most_once(obs: Observation, scenario: Scenario) -> list[Violation]:
    table = call_table_of(Trace.of(obs))
    flagged: set[int] = set()
    out = _appended_lines(obs, table, flagged) + _witness_lines(obs, table, flagged)
    # The calls whose effects the world shows one by one: each is alone in what a rule charges.
    seen: set[int] = set()
    for rule in scenario.expect.effect_rules:
        out += _world_effects(obs, table, rule, flagged, seen)
    for service in scenario.services:
        if service.tool is not None:
            out += _downstream_effects(obs, table, service, flagged, seen)
    out += _repeated_effects(obs, table, flagged, seen)
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


def charged(rule: PatternRule | RecordRule, table: CallTable) -> list[CallSite]:
    """The calls of the rule's tool that may have made its effects: for a record rule, those whose
    arguments do not contradict `where`; when every call contradicts it (a tool that rewrites
    what it is given, `Ana@Example.com` stored lower-cased), all of them, as for a pattern rule:
    the world then cannot tell the calls apart."""
    assert rule.tool is not None
    sites = table.of_tool(rule.tool)
    if isinstance(rule, RecordRule):
        return [s for s in sites if not contradicts(rule.where, s)] or sites
    return sites


def _over(effects: int, sites: list[CallSite], flagged: set[int]) -> bool:
    """More effects than the calls that could have made them, not yet reported by another view of
    the world (every one of those calls already flagged)."""
    return effects > len(sites) and not (sites and all(s.index in flagged for s in sites))


def _world_effects(obs: Observation, table: CallTable, rule: PatternRule | RecordRule,
                   flagged: set[int], seen: set[int]) -> list[Violation]:
    """The effects an oracle names, counted in the workspace: more new ones than calls of the
    tool that could have made them is a call that took effect twice. A rule charged to one call
    shows that call's effects alone (`seen`): its repeat needs no probe to be judged."""
    assert rule.tool is not None
    grew = len(rule.matches(obs.workspace_after.get(rule.path))) - len(
        rule.matches(obs.workspace_before.get(rule.path)))
    sites = charged(rule, table)
    if len(sites) == 1:
        seen.add(sites[0].index)
    if not _over(grew, sites, flagged):
        return []
    what = (rule.describe() if isinstance(rule, RecordRule)
            else f"{rule.path} lines matching {rule.pattern!r}")
    lines = rule.matches(obs.workspace_after.get(rule.path))
    shown = ", ".join(str(n) for n in lines)
    if len(sites) == 1:
        msg = (f"{sites[0].name} took effect {grew} times: {what} gained {grew} (now at lines "
               f"{shown}); {EACH}")
    else:
        msg = (f"{what} gained {grew} (now at lines {shown}), but only {len(sites)} {rule.tool} "
               f"call(s) could have made them ({_ids(sites)}); {EACH}")
    flagged.update(s.index for s in sites)
    return [Violation(ID, msg, {"path": rule.path, "tool": rule.tool, "added": grew,
                                "allowed": len(sites), "call_ids": [s.call_id for s in sites],
                                "file_lines": lines, "judged_from": "world"})]


def _downstream_effects(obs: Observation, table: CallTable, service: Service, flagged: set[int],
                        seen: set[int]) -> list[Violation]:
    """The operations a downstream service applied (its own record, after key dedup), charged to
    the calls of the tool that sends them: more than calls is a call applied twice."""
    assert service.tool is not None
    applied = [r for r in obs.downstream if r.service == service.name and r.applied]
    sites = service_calls(table, service)
    # Each call of the service's tool sends it one operation (the scenario says so by naming the
    # tool), so the service's record, complete and after dedup, judges every repeat of them.
    seen.update(s.index for s in sites)
    if not _over(len(applied), sites, flagged):
        return []
    shown = ", ".join(f"{r.op} (request #{r.seq}, inc{r.incarnation}, {'keyed' if r.key else 'no key'})"
                      for r in applied)
    what = f"service {service.name} applied {len(applied)} operations: {shown}"
    if len(sites) == 1:
        msg = f"{sites[0].name} took effect {len(applied)} times downstream: {what}; {EACH}"
    else:
        msg = f"{what}, but only {len(sites)} {service.tool} call(s) asked for them ({_ids(sites)}); {EACH}"
    flagged.update(s.index for s in sites)
    return [Violation(ID, msg, {"service": service.name, "tool": service.tool, "applied": len(applied),
                                "allowed": len(sites), "ops": [r.op for r in applied],
                                "keys": [r.key for r in applied], "call_ids": [s.call_id for s in sites],
                                "judged_from": "downstream"})]


def _repeated_effects(obs: Observation, table: CallTable, flagged: set[int],
                      seen: set[int]) -> list[Violation]:
    """The trace's view: catches doubles the workspace cannot show (e.g. a write of equal text).
    `seen`: the calls whose own effects an oracle shows in the world."""
    trace = Trace.of(obs)
    effects = site_effects_of(trace)  # of the same table: both are the judged transcript's
    out: list[Violation] = []
    for s in table.sites:
        ran = befores(effects[s.index])
        if len(ran) <= 1 or s.index in flagged:
            continue
        recorded_never = s.start is not None and s.start.replay == Policy.NEVER
        registered = site_policy(s, trace, ran[0].inc)
        registered_never = registered == Policy.NEVER
        # An idempotent tool may run again; whether it took effect again is the world's to say,
        # so with no oracle showing its effect a repeat is judged from the probes, and says so.
        unseen_idempotent = registered == Policy.IDEMPOTENT and s.index not in seen
        if not (recorded_never or registered_never or unseen_idempotent):
            continue
        shown = ", ".join(e.text for e in ran)
        alone = ("" if s.index in seen or s.tool == ToolName.APPEND_NOTE else
                 f" (judged from effect probes alone: no oracle of the scenario shows this call's "
                 f"own effect in the world; name what {s.tool} changes with `tool` in an "
                 "expect.records rule whose `where` tells its calls apart)")
        rule = IDEMPOTENT_RULE if unseen_idempotent and not (recorded_never or registered_never) else RULE
        out.append(Violation(ID, f"{s.name} took effect {len(ran)} times ({shown}); {rule}{alone}", {
            "call_id": s.call_id, "tool": s.tool, "events": [e.ref for e in ran],
            "replay": s.start.replay if s.start else None, "registered": registered,
            "judged_from": "probes"}))
    return out
