"""scenario-oracle: the expected end: outcome, turns, answer, files, lines, records, downstream, hook."""

from __future__ import annotations

from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.records.violation import InvariantId, Violation, short
from crashmatrix.harness.verify.trace import Trace
from crashmatrix.scenarios.hooks import HookFailed, run_check
from crashmatrix.scenarios.model import LineRule, PatternRule, RecordRule, Role, Scenario, count_lines

ID = InvariantId.SCENARIO_ORACLE


def check_scenario_oracle(obs: Observation, scenario: Scenario) -> list[Violation]:
    expect = scenario.expect
    # The outcome and the final answer are the store's to say; without a store reader only the
    # files are judged (the outcome part is reported with the store-bound invariants' reason).
    out = _outcome_and_answer(obs, scenario) if obs.store_read else []
    for path, want in sorted(expect.files.items()):
        got = obs.workspace_after.get(path)
        if got != want:
            what = ("is missing" if got is None
                    else f"differs from the expected content{_first_diff(got, want)}")
            out.append(Violation(ID, f"{path} {what}", {"path": path, "expected": want, "actual": got}))
    trace = Trace.of(obs)
    for line_rule in expect.lines:
        out += _line_rule(obs, trace, line_rule)
    counted: tuple[PatternRule | RecordRule, ...] = (*expect.patterns, *expect.records)
    for rule in counted:
        out += _counted_rule(obs, rule)
    for service, count in sorted(expect.applied.items()):
        ops = sorted({r.op for r in obs.downstream if r.service == service and r.applied and r.op})
        if len(ops) != count:
            out.append(Violation(ID, (
                f"service {service} applied {len(ops)} operation(s) ({', '.join(ops) or 'none'}); "
                f"the scenario expects {count}"), {"service": service, "applied": ops, "expected": count}))
    if expect.check is not None:
        out += _check_hook(obs, scenario, expect.check)
    return out


def _counted_rule(obs: Observation, rule: PatternRule | RecordRule) -> list[Violation]:
    found = rule.matches(obs.workspace_after.get(rule.path))
    if len(found) >= rule.min and (rule.max is None or len(found) <= rule.max):
        return []
    what = (rule.describe() if isinstance(rule, RecordRule)
            else f"{rule.path} lines matching {rule.pattern!r}")
    bounds = (f"exactly {rule.min}" if rule.min == rule.max
              else f"at least {rule.min}" + ("" if rule.max is None else f" and at most {rule.max}"))
    missing = " (the file is missing)" if rule.path not in obs.workspace_after else ""
    return [Violation(ID, (
        f"{what}: {len(found)} (lines {', '.join(map(str, found)) or 'none'}){missing}; the scenario "
        f"expects {bounds}"), {
        "path": rule.path, "count": len(found), "file_lines": found, "min": rule.min, "max": rule.max})]


def _check_hook(obs: Observation, scenario: Scenario, ref: str) -> list[Violation]:
    """The scenario's own check: its messages are violations; a hook that fails is said to."""
    try:
        found = run_check(ref, scenario.source, obs.workspace_after, obs.transcript)
    except HookFailed as exc:
        return [Violation(ID, f"the check hook {ref} {exc} (the hook failed, so the end state "
                              "could not be judged by it)", {"hook": ref, "failed": str(exc)})]
    return [Violation(ID, f"{ref}: {message}", {"hook": ref}) for message in found]


def _outcome_and_answer(obs: Observation, scenario: Scenario) -> list[Violation]:
    expect = scenario.expect
    t = obs.transcript
    out: list[Violation] = []
    wanted = [o.value for o in expect.outcome]
    last = max(t.runs, key=lambda r: r.seq) if t.runs else None
    if last is None or last.outcome not in wanted:
        if last is None:
            ended = "there is no run"
        else:
            state = f"ended {last.outcome}" if last.outcome else "is still open"
            ended = f"the last run {last.run_id} {state}"
        out.append(Violation(ID, f"{ended}; the scenario expects it to end {' or '.join(wanted)}", {
            "run": last.run_id if last else None, "outcome": last.outcome if last else None,
            "expected": wanted}))
    replies = [m for m in t.messages if m.role == Role.ASSISTANT]
    if expect.turns is not None and len(replies) != expect.turns:
        # How far the session got, e.g. that a limit stopped it exactly where it had to.
        out.append(Violation(ID, (
            f"the history holds {len(replies)} assistant message(s) "
            f"({', '.join(m.msg_id for m in replies) or 'none'}); the scenario expects exactly "
            f"{expect.turns}"), {"turns": len(replies), "expected": expect.turns,
                                 "messages": [m.msg_id for m in replies]}))
    final = next((m for m in reversed(t.messages) if m.role == Role.ASSISTANT and not m.calls), None)
    answer = (final.content or "") if final is not None else ""
    # A final answer exists only for a completed run; the scenario format documents
    # final_answer_contains as checked then (an aborted run is judged by its outcome alone).
    completed = last is not None and last.outcome == "completed"
    for needle in expect.final_answer_contains if completed else ():
        if needle not in answer:
            where = (f"the final answer ({final.msg_id}, commit {final.seq}: {short(answer, 60)!r})"
                     if final is not None else "there is no final answer, so it")
            out.append(Violation(ID, f"{where} does not contain {needle!r}", {
                "expected": needle, "answer": answer, "message": final.msg_id if final else None}))
    return out


def _line_rule(obs: Observation, trace: Trace, rule: LineRule) -> list[Violation]:
    text = obs.workspace_after.get(rule.path)
    count = count_lines(text, rule.line)
    boundary = rule.missing_ok_if_crash_before
    reached = boundary is not None and any(boundary.matches(e.kind, e.label) for e in trace.events)
    if rule.accepts(count, crashes=trace.crashes, boundary_reached=reached):
        return []
    high = "" if rule.max is None else f" and at most {rule.max + rule.extra_per_crash * trace.crashes}"
    lines = [k for k, got in enumerate((text or "").splitlines(), start=1) if got == rule.line]
    return [Violation(ID, (
        f"{rule.path} holds the line {rule.line!r} {count} time(s) (lines "
        f"{', '.join(map(str, lines)) or 'none'}); the scenario expects at least {rule.min}{high} "
        f"after {trace.crashes} crash(es)"), {
        "path": rule.path, "line": rule.line, "count": count, "file_lines": lines,
        "min": rule.min, "max": rule.max, "crashes": trace.crashes, "boundary_reached": reached})]


def _first_diff(got: str, want: str) -> str:
    got_lines, want_lines = got.splitlines(), want.splitlines()
    for k, (g, w) in enumerate(zip(got_lines, want_lines, strict=False), start=1):
        if g != w:
            return f" at line {k} ({short(g, 40)!r}, expected {short(w, 40)!r})"
    if len(got_lines) != len(want_lines):
        return f" ({len(got_lines)} lines, expected {len(want_lines)})"
    return " (line endings or trailing newline)"
