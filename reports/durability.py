"""The durability table: a row per agent, a column per promise, every cell a case id or a reason. Pure.

A promise is a question a team asks of its framework ("does a tool's effect happen twice if the
process dies?"), answered from the invariants that judge it, on the cases of the faults that can
break it. Each cell is one of: held (on how many cases), violated (the first failing case, by
what the case is, never by when it finished, and the command that reproduces it), not applicable
(the agent's own declared reason, or the fault the promise needs and the capability the agent
does not declare), inconclusive (no violation, but cases that proved nothing). The table is the
same whatever `--jobs`; it holds no timing, so the committed page changes only when a verdict,
a version or a profile does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tabulate import tabulate

from crashmatrix.harness.records.profile import Profile
from crashmatrix.harness.records.results import CaseResult, Verdict
from crashmatrix.reports.groups import faults_of, steps_of
from crashmatrix.reports.markdown import code

# The capabilities (as adapters declare them, by value) the fault-bound promises need.
FILE_STORE = "file-store"
CONCURRENT = "concurrent"
MARK = "<!-- written by `crashmatrix durability`: regenerate it, do not edit it -->"


class Promise(StrEnum):
    NO_DUPLICATE = "no duplicate effect"
    NOTHING_LOST = "nothing lost"
    NO_RESENT_TASK = "no re-sent task"
    NO_INVENTED = "no invented message"
    PAIRED = "every call answered once"
    FINISHES = "finishes after a crash"
    POWER_LOSS = "survives power loss"
    SECOND_WRITER = "refuses a second writer"


class Status(StrEnum):
    HELD = "held"
    VIOLATED = "violated"
    NOT_APPLICABLE = "not applicable"
    INCONCLUSIVE = "inconclusive"
    NOT_EXERCISED = "not exercised"
    NOT_RUN = "not run"


Violation = Mapping[str, Any]


def _any(_: Violation) -> bool:
    return True


def _resent_task(v: Violation) -> bool:
    return "task_count" in (v.get("evidence") or {})


def _invented(v: Violation) -> bool:
    evidence = v.get("evidence") or {}
    return "task_count" not in evidence


@dataclass(frozen=True)
class Rule:
    """How a promise is judged: the invariants (None: any) whose violations, among the cases of
    `faults` (None: any), break it; `counts` narrows which violations of them do."""

    promise: Promise
    question: str
    invariants: frozenset[str] | None
    faults: frozenset[str] | None = None
    needs: str | None = None  # the capability the adapter must declare for those faults to run
    counts: Callable[[Violation], bool] = _any


RULES = (
    Rule(Promise.NO_DUPLICATE, "a tool's effect, on the workspace or another system, happens at "
         "most once whatever the crash point",
         frozenset({"at-most-once", "safe-rerun", "downstream-key", "status-before-resend"})),
    Rule(Promise.NOTHING_LOST, "a result is never reported without evidence, a commit once "
         "acknowledged stays, a finished run stays finished",
         frozenset({"no-silent-success", "durable-commits", "reserved-result",
                    "finished-stays-finished"})),
    Rule(Promise.NO_RESENT_TASK, "after a restart the model is not given the task again",
         frozenset({"continuation"}), counts=_resent_task),
    Rule(Promise.NO_INVENTED, "every request carries the committed history: no message invented, "
         "dropped or rewritten (a bare \"continue\", a lost result the model had seen)",
         frozenset({"continuation"}), counts=_invented),
    Rule(Promise.PAIRED, "every tool call the model made gets exactly one result",
         frozenset({"pairing"})),
    Rule(Promise.FINISHES, "the run reaches its end after a crash: no hang, no unreadable store, "
         "no run left open or unable to complete",
         frozenset({"liveness", "log-integrity", "final-ends-run", "resume-budget"})),
    Rule(Promise.POWER_LOSS, "after a power loss (what was not synced is lost), no acknowledged "
         "commit, result or message the model saw is lost, and the run still finishes (a tool run "
         "twice is the first column's finding, in kill cases)",
         frozenset({"durable-commits", "no-silent-success", "reserved-result", "finished-stays-finished",
                    "continuation", "pairing", "log-integrity", "liveness", "final-ends-run"}),
         frozenset({"power", "power-blocks", "power-keep1", "power-names", "power-subsets"}), FILE_STORE),
    Rule(Promise.SECOND_WRITER, "a second process started on the same session while the first is "
         "alive is refused", frozenset({"one-writer"}), frozenset({"second"}), CONCURRENT),
)

# Faults a column of their own judges: the other columns read the other cases, so a power loss
# or a second writer is reported once, where its question is asked.
OWN_COLUMN: frozenset[str] = frozenset().union(*(r.faults for r in RULES if r.faults is not None))

# Why a capability's absence leaves a promise unjudged (the adapter did not declare it).
WITHOUT = {
    FILE_STORE: "the power model follows a store of files the agent's own process writes "
                           "and syncs, and this adapter does not declare its store to be one "
                           "(`file-store`)",
    CONCURRENT: "the adapter does not declare `concurrent`: the harness does not start "
                           "a second process on its session, so nothing shows whether it would be "
                           "refused",
}


@dataclass(frozen=True)
class Cell:
    promise: Promise
    status: Status
    cases: int = 0
    first_case: str | None = None
    repro: str | None = None
    reason: str | None = None

    def short(self) -> str:
        if self.status is Status.HELD:
            return f"held ({self.cases})"
        if self.status is Status.VIOLATED:
            return f"violated: {self.first_case}"
        if self.status is Status.INCONCLUSIVE:
            return f"inconclusive: {self.first_case}"
        return str(self.status.value)

    def to_json(self) -> dict[str, Any]:
        return {"promise": self.promise.value, "status": self.status.value, "cases": self.cases,
                "first_case": self.first_case, "repro": self.repro, "reason": self.reason}


@dataclass(frozen=True)
class Row:
    agent: str
    profile: Profile | None
    cells: tuple[Cell, ...]
    cases: int

    def to_json(self) -> dict[str, Any]:
        p = self.profile
        return {"agent": self.agent, "cases": self.cases,
                "profile": None if p is None else {"framework": p.framework, "version": p.version,
                                                   "store": p.store, "restart": p.restart},
                "cells": [c.to_json() for c in self.cells]}


def _order(r: CaseResult) -> tuple[int, bool, tuple[tuple[int, str, str, str], ...], str]:
    # By what the case is: depth, a plain kill before other faults (the simplest way to break a
    # promise is the one to reproduce first), then each step's number as a number.
    schedule = steps_of(r.case) or ()
    return (r.depth, any(s.fault != "kill" for s in schedule),
            tuple((s.n, s.kind, s.label, s.fault) for s in schedule), r.case)



def _declared_na(results: Sequence[CaseResult]) -> dict[str, str]:
    """Invariant -> the reason it was not judged for this agent (wholly, not partly)."""
    out: dict[str, str] = {}
    for r in results:
        for n in r.not_applicable:
            if not n.get("partly"):
                out.setdefault(str(n.get("invariant")), str(n.get("reason")))
    return out


def judge_cell(rule: Rule, results: Sequence[CaseResult], capabilities: frozenset[str]) -> Cell:
    """One agent's cell for one promise, from all its results (sorted here). Only crash cases
    count (a recording that held shows nothing about recovery), and "held" needs a case whose
    situation called for one of the promise's invariants: else it held vacuously, and the cell
    says "not exercised"."""
    mine = sorted((r for r in results if r.depth > 0), key=_order)
    if rule.faults is None:
        mine = [r for r in mine if not set(faults_of(r.case)) & OWN_COLUMN]
    else:
        mine = [r for r in mine if set(faults_of(r.case)) & rule.faults]
        if not mine:
            need = rule.needs
            why = (WITHOUT[need] if need is not None and need not in capabilities
                   else f"no case of {', '.join(sorted(rule.faults))} was run (not selected with "
                        "--fault, or no crash point for it)")
            return Cell(rule.promise, Status.NOT_APPLICABLE, reason=why)
    exempt = _declared_na(results)
    if rule.invariants is not None and rule.invariants <= exempt.keys():
        reasons = "; ".join(f"{i}: {exempt[i]}" for i in sorted(rule.invariants))
        return Cell(rule.promise, Status.NOT_APPLICABLE, reason=reasons)
    for r in mine:
        if any((rule.invariants is None or v.get("invariant") in rule.invariants) and rule.counts(v)
               for v in r.violations):
            return Cell(rule.promise, Status.VIOLATED, len(mine), r.case, r.repro)
    unproven = [r for r in mine if r.verdict in (Verdict.NONDETERMINISTIC, Verdict.ERROR,
                                                 Verdict.SCENARIO_ERROR)]
    if unproven or not mine:
        first = unproven[0] if unproven else None
        return Cell(rule.promise, Status.INCONCLUSIVE, len(mine), first.case if first else None,
                    first.repro if first else None,
                    reason=None if mine else "no crash case ran (the crash-free run failed, or "
                                             "there was no crash point)")
    judged = set(rule.invariants) - exempt.keys() if rule.invariants is not None else None
    known = [r.exercised for r in mine if r.exercised is not None]
    if judged is not None and known and not any(judged & set(e) for e in known):
        return Cell(rule.promise, Status.NOT_EXERCISED, len(mine),
                    reason=f"no case's situation called for {', '.join(sorted(judged))}: they held "
                           "vacuously")
    return Cell(rule.promise, Status.HELD, len(mine))


def row(agent: str, profile: Profile | None, results: Sequence[CaseResult],
        capabilities: frozenset[str], not_run: str | None = None) -> Row:
    """An agent's row: a cell per promise (every one "not run" when the agent ran nothing)."""
    if not_run is not None:
        return Row(agent, profile, tuple(Cell(r.promise, Status.NOT_RUN, reason=not_run) for r in RULES), 0)
    return Row(agent, profile, tuple(judge_cell(rule, results, capabilities) for rule in RULES),
               len(results))


def _md(text: str) -> str:
    """Text Markdown shows as written: no raw HTML, no line break (outside code spans)."""
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("\n", " "))


def _cell(text: str) -> str:
    return text.replace("|", "\\|")  # GFM splits table cells on pipes, even inside code spans


def _cell_md(c: Cell) -> str:
    if c.status is Status.HELD:
        return f"held ({c.cases})"
    if c.status in (Status.VIOLATED, Status.INCONCLUSIVE) and c.first_case:
        return f"**{c.status.value}**: {code(c.first_case)}"
    return f"{c.status.value} ¹" if c.reason else c.status.value


def render_markdown(rows: Sequence[Row], command: str, scenarios: Sequence[str]) -> str:
    """The page (docs/durability.md): the command that wrote it, what each column asks, the table,
    then each failing cell's repro and each unjudged cell's reason."""
    out = ["# Durability table", "", MARK, "",
           f"Written by {code(command)} on {', '.join(code(s) for s in scenarios)}: each "
           "agent's crash matrix, every cell a case id you can reproduce. A cell says **violated** "
           "with the first case that broke the promise, **held** with the number of cases that "
           "judged it, or **not applicable** with the reason below the table (¹).", "",
           "What each column asks:", ""]
    out += [f"- **{r.promise.value}**: {r.question}." for r in RULES]
    head = ["agent", "framework", "version", "store", "restart", *(r.promise.value for r in RULES)]
    out += ["", "| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for rw in rows:
        p = rw.profile
        profile = [p.framework, p.version, p.store, p.restart] if p is not None else ["", "", "", ""]
        out.append("| " + " | ".join(_cell(x) for x in [code(rw.agent), *(_md(x) for x in profile),
                                                        *(_cell_md(c) for c in rw.cells)]) + " |")
    failing = [(rw.agent, c) for rw in rows for c in rw.cells if c.repro]
    if failing:
        out += ["", "## Reproduce a failing cell", ""]
        out += [f"- {code(a)}, {c.promise.value}: {code(c.repro or '')}" for a, c in failing]
    unjudged = [(rw.agent, c) for rw in rows for c in rw.cells if c.reason]
    if unjudged:
        out += ["", "## ¹ Not judged, and why", ""]
        out += [f"- {code(a)}, {c.promise.value}: {_md(c.reason or '')}" for a, c in unjudged]
    return "\n".join(out) + "\n"


def render_terminal(rows: Sequence[Row]) -> str:
    table = tabulate([[rw.agent, *(c.short() for c in rw.cells)] for rw in rows],
                     headers=["agent", *(r.promise.value for r in RULES)])
    return table
