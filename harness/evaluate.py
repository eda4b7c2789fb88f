"""Turns an observation into a case result: verdict, violations, branches, trace, repro command."""

from __future__ import annotations

import shlex

from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.records.results import DEFAULT_AGENT, CaseResult, Verdict
from crashmatrix.harness.verify import judge
from crashmatrix.scenarios.model import Scenario


def repro_command(case_id: str, scenario_dirs: list[str], agent: str = DEFAULT_AGENT) -> str:
    extra = "".join(f" --scenarios {shlex.quote(d)}" for d in scenario_dirs)
    if agent != DEFAULT_AGENT:
        extra += f" --agent {shlex.quote(agent)}"
    return f"crashmatrix repro {shlex.quote(case_id)}{extra}"


def evaluate(obs: Observation, scenario: Scenario, *, fsync: bool, agent: str,
             scenario_dirs: list[str], duration_ms: float) -> CaseResult:
    nondeterministic = next((i.nondeterministic for i in obs.incarnations if i.nondeterministic), None)
    judgement = None if nondeterministic else judge(obs, scenario)
    violations = [v.to_json() for v in judgement.violations] if judgement else []
    if obs.harness_error:
        verdict = Verdict.ERROR
    elif nondeterministic:
        verdict = Verdict.NONDETERMINISTIC
    elif violations:
        verdict = Verdict.FAIL
    else:
        verdict = Verdict.PASS
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
        exit_codes=[inc.exit_code for inc in obs.incarnations],
        requests=len(obs.requests),
        commits=obs.transcript.commits,
        duration_ms=round(duration_ms, 1),
        incarnation_ms=[round(inc.duration_ms, 1) for inc in obs.incarnations],
        fsync=fsync,
        agent=agent,
        repro=repro_command(obs.case.case_id, scenario_dirs, agent),
        note=nondeterministic or obs.harness_error,
        not_applicable=[n.to_json() for n in judgement.not_applicable] if judgement else [],
    )
