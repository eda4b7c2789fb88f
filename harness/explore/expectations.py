"""The end state a correct agent reaches for a plan, at every crash point: the scenario's expect.

Claims are only as strong as every crash schedule allows (at most three crashes, within the
default resume budget of three; at most two provider faults, within three retries):
- a checking append lands exactly once (a fresh read decides any second append);
- a blind append lands at most once, and is missing only when a crash fell before its effect
  (said with `missing_ok_if_crash_before` when it is the scenario's only append; otherwise
  "at most once", since the boundary cannot tell two appends apart);
- a write leaves its content; a command runs at least once, plus at most once per crash;
- with a cancel, the run may end before any call: every count is "at most", the outcome
  completed or cancelled. A final answer, checked only for a completed run, quotes every read.
"""

from __future__ import annotations

from types import MappingProxyType

from crashmatrix.harness.explore.plan import NOTES_HEADER, Action, ActionKind, Care, Plan
from crashmatrix.scenarios.model import Boundary, BoundaryKind, Expect, LineRule, Outcome, ToolName

BLIND_LOST_BEFORE = Boundary(BoundaryKind.EFFECT_AFTER, ToolName.APPEND_NOTE.value)


def _append_rule(action: Action, plan: Plan) -> LineRule:
    if plan.cancelled_maybe:
        return LineRule(action.path, action.text, min=0, max=1)
    if action.care is Care.CHECK:
        return LineRule(action.path, action.text, min=1, max=1)
    appends = [a for a in plan.all_actions() if a.kind is ActionKind.APPEND]
    if appends == [action]:
        return LineRule(action.path, action.text, min=1, max=1,
                        missing_ok_if_crash_before=BLIND_LOST_BEFORE)
    return LineRule(action.path, action.text, min=0, max=1)


def expect(plan: Plan) -> Expect:
    lines: list[LineRule] = []
    files: dict[str, str] = {}
    finals: list[str] = []
    may_stop = plan.cancelled_maybe
    for a in plan.all_actions():
        if a.kind is ActionKind.APPEND:
            lines.append(_append_rule(a, plan))
            if a.care is Care.CHECK and not may_stop:
                files[a.path] = f"{NOTES_HEADER}{a.text}\n"
        elif a.kind is ActionKind.WRITE:
            if may_stop:
                lines.append(LineRule(a.path, a.text, min=0, max=1))
            else:
                files[a.path] = a.args["content"]
        elif a.kind is ActionKind.BASH:
            # An interrupted command is re-issued: each crash may cost one more run.
            lines.append(LineRule(a.path, "ran", min=0 if may_stop else 1, max=1, extra_per_crash=1))
            finals.append(a.text)
        else:
            finals.append(a.text)
    outcome = (Outcome.COMPLETED, Outcome.CANCELLED) if may_stop else (Outcome.COMPLETED,)
    return Expect(outcome=outcome, final_answer_contains=tuple(finals),
                  files=MappingProxyType(files), lines=tuple(lines))
