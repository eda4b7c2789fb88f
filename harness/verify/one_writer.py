"""one-writer: a second process on a live session is refused, names the holder, changes nothing.

Judged from what the harness recorded around each intruder (fault `second`): its probe events,
exit and output, the provider's request count, and the session directory and workspace before
and after it (the holder was frozen meanwhile, so every change is the intruder's). Then the
holder, resumed, must end as an incarnation that was not killed does. A case without an
intruder gives it nothing to judge, and it says nothing; for an agent whose adapter declares no
`concurrent` (so no case starts a second process) `judge` reports it not applicable.
"""

from __future__ import annotations

import re

from crashmatrix.harness.records.observation import IncarnationRecord, Intrusion, Observation
from crashmatrix.harness.records.violation import InvariantId, Violation, short
from crashmatrix.scenarios.model import BoundaryKind, Scenario

ID = InvariantId.ONE_WRITER
K = BoundaryKind
WRITES = frozenset({K.COMMIT_WRITTEN.value, K.COMMIT_AFTER.value})
EFFECTS = frozenset({K.EFFECT_BEFORE.value, K.EFFECT_AFTER.value})
# The holder's exits that mean it ran on to its own end (liveness's normal exits).
ENDED = frozenset({0, 1})
HOLDER_PID = "$HOLDER_PID"  # the holder's pid, in the intruder's output as recorded
# How much of a holder's command line a refusal may quote to name it (an agent cuts long ones).
COMMAND_PREFIX = 60


def check_one_writer(obs: Observation, scenario: Scenario) -> list[Violation]:
    out: list[Violation] = []
    for intrusion in obs.intrusions:
        out += _intruder(intrusion)
        holder = next((i for i in obs.incarnations if i.index == intrusion.holder), None)
        out += _holder(intrusion, holder)
    return out


def _changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))


def names_holder(output: str, pid: int, command: str) -> bool:
    """Whether a refusal names the holder: its pid as a number of its own, or its command line."""
    if re.search(rf"(?<!\d){pid}(?!\d)", output):
        return True
    prefix = command[:COMMAND_PREFIX]
    return bool(prefix) and prefix in output


def _intruder(x: Intrusion) -> list[Violation]:
    r = x.record
    who = f"the second process (`{r.command}`, started while inc{x.holder} was frozen)"
    did: list[str] = []
    writes = [e for e in r.events if e.kind in WRITES]
    effects = [e for e in r.events if e.kind in EFFECTS]
    asked = [e for e in r.events if e.kind == K.PROVIDER_BEFORE.value]
    requests = x.requests_after - r.requests_before
    session = _changed(x.session_before, x.session_after)
    workspace = _changed(x.workspace_before, x.workspace_after)
    commits = sorted({e.detail.get("seq", e.n) for e in writes}, key=str)
    if commits:
        did.append(f"made {len(commits)} commit(s)")
    if effects:
        tools = sorted({e.label for e in effects})
        did.append(f"ran {sum(e.kind == K.EFFECT_BEFORE.value for e in effects)} effect(s) "
                   f"({', '.join(tools)})")
    if requests or asked:
        did.append(f"made {max(requests, len(asked))} provider request(s)")
    if session:
        did.append(f"changed {', '.join(session)} in the session directory")
    if workspace:
        did.append(f"changed {', '.join(workspace)} in the workspace")
    # The intruder's own events, by number (its index is the holder's: `inc1` would be ambiguous).
    events = [f"#{e.n} {e.point}" for e in [*writes, *effects, *asked]]
    if r.timed_out or r.runaway is not None:
        refused = "it never ended (killed at its deadline)" if r.timed_out else (
            f"it ran away ({r.runaway} events)")
    elif r.exit_code == 0:
        refused = "it exited 0, as if it had been let in"
    elif r.exit_code is None:
        refused = "it did not end on its own"
    elif not names_holder(x.output, x.holder_pid, x.holder_command):
        refused = (f"it exited {r.exit_code} without naming the holder (its pid or command): "
                   f"{short(_output(x)) or 'it printed nothing'}")
    else:
        refused = None
    if not did and refused is None:
        return []
    what = ", ".join(did) if did else "changed nothing"
    tail = f"; {refused}" if refused else ""
    return [Violation(ID, (
        f"{who} {what}{tail}; while another process holds a session, a second one must be "
        "refused, name the holder, and write nothing"), {
        "holder": x.holder, "command": r.command,
        "exit_code": r.exit_code, "timed_out": r.timed_out, "intruder_events": events,
        "requests": list(range(r.requests_before, x.requests_after)),
        "session_changed": session, "workspace_changed": workspace, "output": short(_output(x), 400)})]


def _output(x: Intrusion) -> str:
    """The intruder's output with the holder's pid as a word: pids differ from run to run, and a
    case's result must not (`--jobs`, shards, `merge`)."""
    return re.sub(rf"\b{x.holder_pid}\b", HOLDER_PID, x.output)


def _holder(x: Intrusion, holder: IncarnationRecord | None) -> list[Violation]:
    if holder is None:
        return []
    if not holder.killed and not holder.timed_out and holder.runaway is None \
            and holder.exit_code in ENDED:
        return []
    if holder.timed_out:
        how = "hung"
    elif holder.runaway is not None:
        how = f"ran away ({holder.runaway} events)"
    elif holder.crashed_at is not None:
        how = f"was killed at event {holder.crashed_at}"
    elif holder.killed_at_call is not None:
        how = f"was killed entering {holder.killed_at_call}"
    else:
        how = f"exited {holder.exit_code}"
    return [Violation(ID, (
        f"inc{x.holder}, frozen at event {holder.frozen_at} while a second process was started on "
        f"its session, {how} once resumed; the process that holds a session must complete"), {
        "holder": x.holder, "frozen_at": holder.frozen_at, "exit_code": holder.exit_code,
        "timed_out": holder.timed_out, "crashed_at": holder.crashed_at})]
