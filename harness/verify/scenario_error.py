"""Scenario mistakes: the case went wrong because of the scenario, not the agent (verdict
`scenario-error`, docs/scenarios.md "When the scenario is wrong").

Two mistakes are recognised, from the case's own evidence only:

- **script-gap**: the fake provider answered a request HTTP 400 of type `crashmatrix_script_gap`:
  no rule of the script matches that history. The cause names the request, the incarnation that
  sent it and the request's last messages (role and a short text), and says the fix. Not when
  the request is one no correct agent sends, whatever the script: one that goes on with a run
  after the model asked it to stop (an ok `stop_run` result) or after its final answer, with no
  user message since. A script has no rule for that on purpose (a tripwire, as in `tool-stop`),
  and the case is judged as usual.
- **script-loop**: the script never let the conversation end. An incarnation the schedule did
  not kill stopped (killed at the step bound, `--max-events`; killed at the case deadline; or it
  gave up on its own, e.g. at the agent's own step limit) while its trailing requests were each
  answered with tool calls, on a longer history than the one before (the agent took every reply
  in), one rule answering at least LOOP_MIN of them. Killed at a bound, the agent must also have
  emitted no more events after its last request than one step of that loop took. An agent that
  loops on its own (re-sending one history, or busy without asking the model) shows none of
  this: its runaway is a `liveness` violation.

A mistake *explains* the violations that follow from it, whatever the agent: a script that
cannot answer, or never lets the run end, leaves an end state other than the one the scenario
expects (`scenario-oracle`), and a loop killed at a bound did not end (`liveness`). Any other
violation is the agent's own, and the case stays `fail` (with the mistake noted beside it).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import pairwise
from typing import Any

from crashmatrix.harness.records.observation import IncarnationRecord, Observation, Request
from crashmatrix.harness.records.violation import InvariantId, Violation, short
from crashmatrix.harness.verify.final_ends_run import open_final_answer
from crashmatrix.scenarios.model import ProviderSettings, ResultStatus, ToolName

GAP_TYPE = "crashmatrix_script_gap"  # fakes/api_errors.script_gap
GAP_FIX = "no rule of the script matches this request; add a rule whose `when` holds for it"
LOOP_FIX = ("no rule of the script gives this conversation a final answer; give it a rule with "
            "`reply.final` whose `when` holds once the work is done, before the rule that repeats")
LOOP_MIN = 20  # answers by one rule, in a row of tool-call replies, that make a loop
LAST_MESSAGES = 3  # of a gap request, shown in its cause
STEP_SLACK = 32  # events allowed after the loop's last request beyond one step of it
PROVIDER_BEFORE = "provider.before"
UNKNOWN_MARKER = ProviderSettings().unknown_marker
STOP_RUN = ToolName.STOP_RUN.value


class MistakeKind(StrEnum):
    SCRIPT_GAP = "script-gap"
    SCRIPT_LOOP = "script-loop"


# The invariants whose violations a mistake accounts for (see the module docstring).
END_STATE = frozenset({InvariantId.SCENARIO_ORACLE})
END_STATE_AND_ENDING = frozenset({InvariantId.SCENARIO_ORACLE, InvariantId.LIVENESS})


@dataclass(frozen=True)
class ScenarioMistake:
    kind: MistakeKind
    message: str  # one line: what happened and what to change
    evidence: dict[str, Any]
    explained: frozenset[InvariantId] = END_STATE

    def to_json(self) -> dict[str, Any]:
        """The `scenario_error` of a case result."""
        return {"kind": self.kind.value, "message": self.message, **self.evidence}

    def explains(self, violations: Iterable[Violation]) -> bool:
        return all(v.invariant in self.explained for v in violations)

    def decides(self, violations: Sequence[Violation]) -> bool:
        """Whether the case's verdict is this mistake: it explains every violation, and there is
        one, or it is a gap (a request the script cannot answer is never a test that held; a
        loop the scenario's expectation accepts, e.g. one that tests a step limit, is)."""
        return self.explains(violations) and (bool(violations) or self.kind is MistakeKind.SCRIPT_GAP)


def find_mistake(obs: Observation, unknown_marker: str = UNKNOWN_MARKER) -> ScenarioMistake | None:
    """The scenario mistake the case shows, the first script gap before any loop; None if none.
    `unknown_marker`: the scenario's `provider.unknown_marker`, to name a result's status."""
    gap = next((r for r in obs.requests if r.error_type == GAP_TYPE), None)
    if gap is not None:
        return None if went_on(gap.messages, unknown_marker) else _gap(obs, gap, unknown_marker)
    for inc in obs.incarnations:
        if not inc.killed:  # it stopped by itself, or at a bound; not by the schedule
            loop = _loop(obs, inc)
            if loop is not None:
                return loop
    return None


def tripwire(obs: Observation, unknown_marker: str = UNKNOWN_MARKER) -> str | None:
    """A note for a script gap that is the agent's doing (see `went_on`), or None."""
    gap = next((r for r in obs.requests if r.error_type == GAP_TYPE), None)
    why = went_on(gap.messages, unknown_marker) if gap is not None else None
    if gap is None or why is None:
        return None
    return (f"request #{gap.index} got HTTP {gap.status} {GAP_TYPE}, and that is the agent's doing, "
            f"not the script's: {why}")


# -- script-gap ------------------------------------------------------------------------------
def _incarnation_of(obs: Observation, request: Request) -> IncarnationRecord | None:
    return next((inc for inc in reversed(obs.incarnations) if inc.requests_before <= request.index),
                None)


def _text(content: Any) -> str:
    if isinstance(content, list):  # content parts: their text, as the fake reads them
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _status(content: str, unknown_marker: str) -> ResultStatus:
    """A tool result's status as the fake judges it (docs/scenarios.md, Conditions)."""
    if unknown_marker in content:
        return ResultStatus.UNKNOWN
    return ResultStatus.ERROR if content.startswith("ERROR: ") else ResultStatus.OK


def went_on(messages: Sequence[Any], unknown_marker: str) -> str | None:
    """Why a history is one no correct agent asks the model about, or None: since the last user
    message, the run was told to end (an ok `stop_run` result, or a final answer)."""
    since: list[dict[str, Any]] = []
    for m in reversed(messages):
        if not isinstance(m, dict) or m.get("role") == "user":
            break
        since.append(m)
    since.reverse()
    stops = {c.get("id") for m in since if isinstance(m.get("tool_calls"), list)
             for c in m["tool_calls"]
             if isinstance(c, dict) and (c.get("function") or {}).get("name") == STOP_RUN}
    if open_final_answer(since) is not None:
        return "it goes on after the run's final answer"
    for m in since:
        if (m.get("role") == "tool" and m.get("tool_call_id") in stops
                and _status(_text(m.get("content")), unknown_marker) is ResultStatus.OK):
            return "it goes on after stop_run asked the run to stop"
    return None


def hint(messages: Sequence[Any], unknown_marker: str) -> str | None:
    """A `when` that holds for a history, from its last message: after a tool result, the
    latest turn's result of that tool with its status; after a user message, the turn count."""
    last = messages[-1] if messages else None
    if not isinstance(last, dict):
        return None
    if last.get("role") == "tool":
        tools = {c.get("id"): (c.get("function") or {}).get("name")
                 for m in messages if isinstance(m, dict) and isinstance(m.get("tool_calls"), list)
                 for c in m["tool_calls"] if isinstance(c, dict)}
        tool = tools.get(last.get("tool_call_id"))
        if not isinstance(tool, str):
            return None
        status = _status(_text(last.get("content")), unknown_marker)
        return f'when = {{ last_turn = {{ {tool} = "{status.value}" }} }}'
    if last.get("role") == "user":
        turns = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")
        return f"when = {{ turns = {turns} }}"
    return None


def _call(call: Any) -> str:
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict):
        return short(json.dumps(call, ensure_ascii=False, default=str), 60)
    try:
        args = json.loads(fn.get("arguments") or "{}")
        shown = ", ".join(f"{k}={short(v, 30)}" for k, v in args.items()) if isinstance(args, dict) \
            else short(args, 40)
    except (ValueError, TypeError):
        shown = short(fn.get("arguments"), 40)
    return f"{fn.get('name')}({shown})"


def describe(message: Any) -> dict[str, str]:
    """One message of a request as the cause shows it: its role and a short text (tool calls
    by name and arguments; a tool result with its call id)."""
    if not isinstance(message, dict):
        return {"role": "?", "text": short(message, 100)}
    role = str(message.get("role"))
    text = short(_text(message.get("content")), 160)
    calls = message.get("tool_calls")
    if role == "assistant" and isinstance(calls, list) and calls:
        called = "calls " + "; ".join(_call(c) for c in calls)
        text = f"{text} {called}".strip() if text else called
    elif role == "tool":
        text = f"{message.get('tool_call_id')}: {text}"
    return {"role": role, "text": text}


def _gap(obs: Observation, request: Request, unknown_marker: str) -> ScenarioMistake:
    inc = _incarnation_of(obs, request)
    last = [describe(m) for m in request.messages[-LAST_MESSAGES:]]
    where = f"request #{request.index}" + (f" (inc{inc.index}, {inc.command})" if inc else "")
    shown = " | ".join(f"{m['role']}: {m['text']}" for m in last) or "(no messages)"
    when = hint(request.messages, unknown_marker)
    headline = f"{where} got HTTP {request.status} {GAP_TYPE}: {GAP_FIX}" + (
        f" (e.g. `{when}`)" if when else "")
    return ScenarioMistake(MistakeKind.SCRIPT_GAP, f"{headline}; its last messages: {shown}", {
        "headline": headline, "request": request.index,
        "incarnation": inc.index if inc else None, "messages": len(request.messages),
        "last_messages": last, "fix": GAP_FIX, "hint": when})


# -- script-loop -----------------------------------------------------------------------------
def _requests_of(obs: Observation, inc: IncarnationRecord) -> Sequence[Request]:
    incs = obs.incarnations
    k = incs.index(inc)
    end = incs[k + 1].requests_before if k + 1 < len(incs) else len(obs.requests)
    return obs.requests[inc.requests_before:end]


def _answered_with_calls(r: Request) -> bool:
    return r.status == 200 and r.rule is not None and bool((r.reply or {}).get("tool_calls"))


def _streak(requests: Sequence[Request]) -> list[Request]:
    """The trailing requests answered with tool calls, each on a longer history than the last."""
    out: list[Request] = []
    for r in reversed(requests):
        if not _answered_with_calls(r) or (out and len(r.messages) >= len(out[-1].messages)):
            break
        out.append(r)
    out.reverse()
    return out


def _step_tail_fits(inc: IncarnationRecord) -> bool:
    """After its last request the agent did no more than one step of its loop (else it was
    busy on its own, not waiting on the script)."""
    asks = [e.n for e in inc.events if e.kind == PROVIDER_BEFORE]
    if len(asks) < 2:
        return True  # an agent without provider probes: the requests alone must tell
    step = max(b - a for a, b in pairwise(asks))
    emitted = inc.runaway if inc.runaway is not None else len(inc.events)
    return emitted - asks[-1] <= step + STEP_SLACK


def _ending(obs: Observation, inc: IncarnationRecord) -> tuple[str, str]:
    """How the incarnation stopped: ("max-events" | "deadline" | "agent", in words)."""
    if inc.runaway is not None:
        return "max-events", (f"emitted {inc.runaway} probe events without ending (the step bound, "
                              f"--max-events, is {inc.runaway - 1})")
    if inc.timed_out:
        return "deadline", (f"was still going after {len(inc.events)} probe events when the case "
                            "deadline passed")
    last = max(obs.transcript.runs, key=lambda r: r.seq) if obs.transcript.runs else None
    if last is not None and last.outcome is not None:
        why = f" ({last.reason})" if last.reason else ""
        return "agent", f"gave up: its run {last.run_id} ended {last.outcome}{why}"
    return "agent", f"gave up: it exited with code {inc.exit_code}"


def _loop(obs: Observation, inc: IncarnationRecord) -> ScenarioMistake | None:
    streak = _streak(_requests_of(obs, inc))
    counts: dict[str, int] = {}
    for r in streak:
        counts[str(r.rule)] = counts.get(str(r.rule), 0) + 1
    rule, most = max(counts.items(), key=lambda kv: kv[1], default=("", 0))
    if most < LOOP_MIN:
        return None
    ended_by, ended = _ending(obs, inc)
    if ended_by != "agent" and not _step_tail_fits(inc):
        return None
    others = sorted(set(counts) - {rule})
    also = f" (with {', '.join(repr(o) for o in others)})" if others else ""
    return ScenarioMistake(MistakeKind.SCRIPT_LOOP, (
        f"inc{inc.index} ({inc.command}) {ended}, after the script kept it going: rule {rule!r} "
        f"answered {most} of its last {len(streak)} requests{also}, each with tool calls; "
        f"{LOOP_FIX}"), {
        "incarnation": inc.index,
        "events": inc.runaway if inc.runaway is not None else len(inc.events),
        "bound": inc.runaway - 1 if inc.runaway is not None else None, "ended_by": ended_by,
        "rule": rule, "repeats": most, "requests": len(streak), "rules": dict(sorted(counts.items())),
        "fix": LOOP_FIX}, END_STATE if ended_by == "agent" else END_STATE_AND_ENDING)


# -- the step bound --------------------------------------------------------------------------
def runaway_violation(inc: IncarnationRecord) -> Violation:
    """`liveness` for an incarnation killed at the step bound."""
    assert inc.runaway is not None
    return Violation(InvariantId.LIVENESS, (
        f"inc{inc.index} ({inc.command}) emitted {inc.runaway} events in one incarnation without "
        f"ending; a runaway loop (the step bound, --max-events, is {inc.runaway - 1})"),
        {"incarnation": inc.index, "events": inc.runaway, "bound": inc.runaway - 1})


def judged_view(obs: Observation) -> Observation:
    """The observation as the checks judge it: an incarnation killed at the step bound was killed
    by the harness for not ending, as a hung one is (`timed_out`), so no check blames the agent
    for what a crash state legitimately lacks."""
    if all(inc.runaway is None for inc in obs.incarnations):
        return obs
    return dataclasses.replace(obs, incarnations=[
        dataclasses.replace(inc, timed_out=True) if inc.runaway is not None else inc
        for inc in obs.incarnations])


def with_runaways(violations: Sequence[Violation], obs: Observation) -> list[Violation]:
    """`violations` of the judged view, with liveness's words for an incarnation it saw as hung
    replaced by the runaway's (it emitted events to the end; it did not hang)."""
    runaway = {inc.index: inc for inc in obs.incarnations if inc.runaway is not None}
    if not runaway:
        return list(violations)
    out: list[Violation] = []
    said: set[int] = set()
    for v in violations:
        index = v.evidence.get("incarnation") if v.invariant is InvariantId.LIVENESS else None
        if index in runaway and "exit_code" not in v.evidence:
            if index not in said:
                out.append(runaway_violation(runaway[index]))
                said.add(index)
            continue
        out.append(v)
    out += [runaway_violation(inc) for i, inc in sorted(runaway.items()) if i not in said]
    return out
