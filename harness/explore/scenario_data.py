"""A Scenario as plain data in the scenario file format, so `parse_scenario` reads it back equal."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from crashmatrix.scenarios.model import (
    Condition,
    Expect,
    Fault,
    LineRule,
    PatternRule,
    ProviderFault,
    RecordRule,
    Reply,
    ResultKey,
    ResultStatus,
    Rule,
    Scenario,
    Service,
)

Data = dict[str, Any]


def _statuses(table: Mapping[ResultKey, frozenset[ResultStatus]]) -> Data:
    # Sorted, so equal scenarios give byte-equal data (the generated name is a digest of it).
    return {str(k): sorted(s.value for s in v) for k, v in sorted(table.items(), key=lambda kv: str(kv[0]))}


def _texts(table: Mapping[ResultKey, str]) -> Data:
    return {str(k): v for k, v in sorted(table.items(), key=lambda kv: str(kv[0]))}


def condition_data(c: Condition) -> Data:
    out: Data = {}
    for name, table in (("results", c.results), ("last_turn", c.last_turn)):
        if table:
            out[name] = _statuses(table)
    for name, texts in (("contains", c.contains), ("lacks", c.lacks)):
        if texts:
            out[name] = _texts(texts)
    scalars: dict[str, object] = {
        "user_contains": c.user_contains, "user_lacks": c.user_lacks,
        "last_role": c.last_role.value if c.last_role is not None else None,
        "turns": c.turns, "min_turns": c.min_turns, "max_turns": c.max_turns,
    }
    out.update({k: v for k, v in scalars.items() if v is not None})
    return out


def _reply(r: Reply) -> Data:
    if r.is_final:
        return {"final": r.text or ""}
    out: Data = {} if r.text is None else {"content": r.text}
    out["tool_calls"] = [{"tool": c.tool, "args": dict(c.args)} for c in r.tool_calls]
    return out


def _rule(r: Rule) -> Data:
    out: Data = {"name": r.name}
    when = condition_data(r.when)
    if when:
        out["when"] = when
    out["reply"] = _reply(r.reply)
    return out


def _fault(f: Fault) -> Data:
    out: Data = {"kind": f.kind.value, "when": condition_data(f.when), "times": f.times}
    if f.kind is ProviderFault.TIMEOUT:
        out["hold_s"] = f.hold_s
    return out


def _line(rule: LineRule) -> Data:
    out: Data = {"path": rule.path, "line": rule.line, "min": rule.min,
                 "extra_per_crash": rule.extra_per_crash}
    if rule.max is not None:
        out["max"] = rule.max
    if rule.missing_ok_if_crash_before is not None:
        out["missing_ok_if_crash_before"] = str(rule.missing_ok_if_crash_before)
    return out


def _counted(rule: PatternRule | RecordRule) -> Data:
    """A pattern or record rule (a user's oracle): what it matches, the tool it charges, its bounds."""
    out: Data = {"path": rule.path, "min": rule.min}
    out.update({"pattern": rule.pattern} if isinstance(rule, PatternRule) else {"where": dict(rule.where)})
    if rule.tool is not None:
        out["tool"] = rule.tool
    if rule.max is not None:
        out["max"] = rule.max
    return out


def _expect(e: Expect) -> Data:
    return {"outcome": [o.value for o in e.outcome],
            **({"final_answer_contains": list(e.final_answer_contains)}
               if e.final_answer_contains else {}),
            **({"turns": e.turns} if e.turns is not None else {}),
            "files": dict(e.files), "lines": [_line(r) for r in e.lines],
            **({"patterns": [_counted(r) for r in e.patterns]} if e.patterns else {}),
            **({"records": [_counted(r) for r in e.records]} if e.records else {}),
            **({"check": e.check} if e.check is not None else {}),
            **({"applied": dict(e.applied)} if e.applied else {})}


def _service(v: Service) -> Data:
    optional = {"status": v.status, "reference": v.reference, "tool": v.tool, "url_env": v.url_env}
    return {"name": v.name, "dedup": str(v.dedup),
            "create": {"method": v.create.method, "path": v.create.path,
                       "response": dict(v.create.response)},
            **{k: x for k, x in optional.items() if x is not None},
            **({"where": dict(v.where)} if v.where else {})}


def scenario_data(s: Scenario) -> Data:
    """Every field, explicitly (defaults too): the data is the whole scenario, self-contained."""
    return {
        "name": s.name,
        "description": s.description,
        "task": s.task,
        "workspace": dict(s.workspace),
        "tools": {
            "enabled": list(s.tools.enabled),
            "policies": {t: p.value for t, p in s.tools.policies.items()},
            "restart_policies": {t: p.value for t, p in s.tools.restart_policies.items()},
        },
        "agent": {"resume_budget": s.agent.resume_budget, "max_retries": s.agent.max_retries,
                  "retry_delay_s": s.agent.retry_delay_s,
                  "provider_timeout_s": s.agent.provider_timeout_s, "max_steps": s.agent.max_steps},
        "provider": {"unknown_marker": s.provider.unknown_marker,
                     "call_ids": s.provider.call_ids.value},
        "script": [_rule(r) for r in s.script],
        "faults": [_fault(f) for f in s.faults],
        "inputs": [{"id": i.id, "text": i.text, "at": str(i.at)} for i in s.inputs],
        "cancels": [{"id": c.id, "at": str(c.at)} for c in s.cancels],
        "expect": _expect(s.expect),
        "matrix": {"crash_loop": s.matrix.crash_loop,
                   **({} if s.matrix.max_depth is None else {"max_depth": s.matrix.max_depth})},
        **({"services": [_service(v) for v in s.services]} if s.services else {}),
    }
