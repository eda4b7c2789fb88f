"""Turns an observation into a case result: verdict, violations, branches, trace, repro command.

Verdicts, first that applies: `error` (the harness failed), `nondeterministic` (the crash point
was not the recorded event), `scenario-error` (a scenario mistake, harness/verify/scenario_error,
that explains every violation found), `fail` (an invariant was violated), `pass`.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping

from crashmatrix.harness.records.case import Case
from crashmatrix.harness.records.evidence import evidence, scrubbed
from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.records.output_tail import agent_output
from crashmatrix.harness.records.results import (
    DEFAULT_AGENT,
    DEFAULT_MAX_EVENTS,
    DEFAULT_TIMEOUT_S,
    CaseResult,
    Verdict,
)
from crashmatrix.harness.verify import judge
from crashmatrix.harness.verify.scenario_error import find_mistake, judged_view, tripwire, with_runaways
from crashmatrix.scenarios.model import Scenario


def repro_command(case_id: str, scenario_dirs: list[str], agent: str = DEFAULT_AGENT,
                  max_events: int | None = None, *, fsync: bool = False,
                  timeout_s: float | None = None, fsync_default: bool = False,
                  blackbox: bool = False, run_dir: str | None = None) -> str:
    """The one-line command that re-runs a case, naming every option that changes its verdict
    and is not the default: the agent, fsync, and the bounds a case hit (`max_events`: the step
    bound it was killed at; `timeout_s`: the deadline it ran out). `scenario_dirs` as the command
    should print them: the CLI passes them
    relative to the repository root (harness/cli/portable.py), so a line from a CI log runs
    unchanged from the root of another clone."""
    extra = "".join(f" --scenarios {shlex.quote(d)}" for d in scenario_dirs)
    if agent != DEFAULT_AGENT:
        extra += f" --agent {shlex.quote(agent)}"
    if max_events is not None and max_events != DEFAULT_MAX_EVENTS:
        extra += f" --max-events {max_events}"
    if fsync != fsync_default:  # on by default for a case with a power loss (`observed`)
        extra += f" --fsync {'on' if fsync else 'off'}"
    if timeout_s is not None and timeout_s != DEFAULT_TIMEOUT_S:
        extra += f" --timeout {timeout_s:g}"
    if blackbox and not Case.parse(case_id).blackbox:  # a black-box step's id says so itself
        extra += " --black-box"
    # An agent found from the directory the run was started in (its app, its adapter) is found
    # again only there: the line goes there first, from the repository's root (portable.py).
    cd = f"cd {shlex.quote(run_dir)} && " if run_dir else ""
    return f"{cd}crashmatrix repro {shlex.quote(case_id)}{extra}"


def policies_of(obs: Observation) -> dict[str, str] | None:
    """The registered policies of the first incarnation, and where a recovery's differ, that too."""
    if not obs.incarnations:
        return None
    first = obs.incarnations[0].policies
    restart = next((i.policies for i in obs.incarnations if i.command == "recover"), first)
    return {tool: policy if restart.get(tool, policy) == policy else f"{policy}, restart {restart[tool]}"
            for tool, policy in first.items()}


def _offered(obs: Observation) -> list[str]:
    """The variants offered by the incarnation its last step crashed (a variant-less step):
    a variant of an earlier step is a sibling of the shallower case that ran that step last."""
    case = obs.case
    if not case.schedule or case.schedule[-1].variant is not None:
        return []
    last = case.depth + 1 if case.crashes_settle else case.depth
    return next((list(inc.variants) for inc in obs.incarnations if inc.index == last), [])


def evaluate(obs: Observation, scenario: Scenario, *, fsync: bool, agent: str,
             scenario_dirs: list[str], duration_ms: float, timeout_s: float | None = None,
             run_dir: str | None = None,
             env: Mapping[str, str] = os.environ) -> CaseResult:
    """The case's result. `env`: the environment whose secret values are redacted from what the
    agent printed (records/redact.py); the agent inherited the harness's."""
    nondeterministic = next((i.nondeterministic for i in obs.incarnations if i.nondeterministic), None)
    judgement = None if nondeterministic else judge(judged_view(obs), scenario)
    found = with_runaways(judgement.violations, obs) if judgement else []
    mistake = (None if obs.harness_error or nondeterministic
               else find_mistake(obs, scenario.provider.unknown_marker))
    note = nondeterministic or obs.harness_error
    if obs.harness_error:
        verdict = Verdict.ERROR
    elif nondeterministic:
        verdict = Verdict.NONDETERMINISTIC
    elif mistake is not None and mistake.decides(found):
        # What the mistake explains is not judged against the agent: the verdict is the cause.
        verdict, found, note = Verdict.SCENARIO_ERROR, [], mistake.message
    elif found:
        verdict = Verdict.FAIL
        if mistake is not None:
            note = f"the scenario is wrong too: {mistake.message}"
        else:
            note = tripwire(obs, scenario.provider.unknown_marker)
    else:
        verdict = Verdict.PASS
    observed = any(i.observed for i in obs.incarnations)
    if verdict is Verdict.FAIL and observed and not fsync:
        # The likeliest cause, said first: the agent was told not to sync.
        note = ("the agent ran with --fsync off, so a power loss kept none of what it wrote since its "
                "last sync: acknowledged commits included; visibly unsafe (run with --fsync on)"
                + (f"; {note}" if note else ""))
    if verdict is not Verdict.PASS and obs.scratch_low:
        # First: a full disk explains failures no agent could avoid (issue 33, W2).
        note = obs.scratch_low + (f"; {note}" if note else "")
    # Scrubbed like the evidence: a message may quote a scratch path (the case tree's, which
    # differs from run to run) or a duration from a tool's output; a case's record must not.
    violations = scrubbed([v.to_json() for v in found])
    branches: list[str] = []
    for inc in obs.incarnations:
        for e in inc.events:
            if e.kind == "recovery.branch" and e.label not in branches:
                branches.append(e.label)
    return CaseResult(
        case=obs.case.case_id,
        scenario=obs.case.scenario,
        depth=obs.case.depth,
        verdict=verdict,
        violations=violations,
        branches=branches,
        trace=[[e.point for e in inc.events] for inc in obs.incarnations],
        crashed_at=[inc.crashed_at for inc in obs.incarnations],
        store_calls=[inc.store_calls for inc in obs.incarnations] if not obs.probes else [],
        syscall_points=([inc.store_calls for inc in obs.incarnations]
                        if obs.probes and any(inc.store_calls for inc in obs.incarnations) else []),
        downstream=[obs.requests_of(inc.index) for inc in obs.incarnations] if obs.downstream else [],
        variants=_offered(obs),
        exit_codes=[inc.exit_code for inc in obs.incarnations],
        requests=len(obs.requests),
        commits=obs.transcript.commits,
        duration_ms=round(duration_ms, 1),
        incarnation_ms=[round(inc.duration_ms, 1) for inc in obs.incarnations],
        fsync=fsync,
        agent=agent,
        repro=repro_command(obs.case.case_id, scenario_dirs, agent, next(
            (inc.runaway - 1 for inc in obs.incarnations if inc.runaway is not None), None),
            # The deadline only where it decided something: a case that ran out of it.
            fsync=fsync, timeout_s=timeout_s if any(i.timed_out for i in obs.incarnations) else None,
            # On by default for a power loss (`observed`) and in black-box mode (syncs are points).
            fsync_default=observed or not obs.probes, blackbox=not obs.probes, run_dir=run_dir),
        note=None if note is None else scrubbed(note),
        not_applicable=[n.to_json() for n in judgement.not_applicable] if judgement else [],
        exercised=[str(i) for i in judgement.exercised] if judgement else None,
        # Beside a pass (a loop the scenario accepts) a mistake is no finding: left out.
        scenario_error=(scrubbed(mistake.to_json()) if mistake is not None and verdict in
                        (Verdict.SCENARIO_ERROR, Verdict.FAIL) else None),
        evidence=None if verdict is Verdict.PASS else evidence(obs),
        policies=policies_of(obs),
        # Decoded and redacted only here, for a case that did not pass: a pass never needs it.
        agent_output=None if verdict is Verdict.PASS else agent_output(obs, env),
    )
