"""Distinct failures: failing cases grouped by root cause (the first promise broken, and what about)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from crashmatrix.harness.records.case import Case, CaseIdError, CrashStep
from crashmatrix.harness.records.results import CaseResult
from crashmatrix.harness.records.violation import InvariantId

# The boundary and fault of a case that crashes nowhere (`changelog/none`), or whose id does not
# parse (a hand-edited results file): still a place of its own, never dropped.
NO_CRASH = "none"
UNKNOWN = "?"

# The verifier's order is causal (records/violation.py: a second writer first, the scenario's
# expected end state last): of the invariants one case broke, the first is the cause and the
# rest usually its consequences. A doubled email breaks at-most-once, and the outbox then has
# two records, so scenario-oracle too: one cause, not two. An id the verifier does not know (a
# hand-edited results file) sorts after every known one.
_RANK = {str(i): n for n, i in enumerate(InvariantId)}
# Where a violation says what it is about: the tool whose effect doubled, the downstream service,
# the file. Two tools that each send twice are two causes (two fixes), though one invariant.
_SUBJECT_FIELDS = ("tool", "service", "path")


def in_report_order(invariants: Iterable[str]) -> tuple[str, ...]:
    """Invariant ids, each once, in the verifier's (causal) order."""
    return tuple(sorted(set(invariants), key=lambda i: (_RANK.get(i, len(_RANK)), i)))


@dataclass(frozen=True, order=True)
class GroupKey:
    """A root cause: cases with one key are one failure, however many invariants each broke and
    wherever its crash landed (the group lists both)."""

    root: str  # the first invariant broken in the verifier's order, or the verdict if none was
    subject: str  # what the root violation is about (a tool, a service, a file); "" if it names none
    verdict: str  # fail, nondeterministic, error, scenario-error

    @property
    def label(self) -> str:
        """One line for a reader: `at-most-once (send_email)`."""
        return f"{self.root} ({self.subject})" if self.subject else self.root


@dataclass(frozen=True)
class FailureGroup:
    key: GroupKey
    cases: tuple[CaseResult, ...]  # in case id order

    @property
    def invariants(self) -> tuple[str, ...]:
        """Every invariant the group's cases broke, the root first."""
        return in_report_order(i for r in self.cases for i in r.invariants)

    @property
    def places(self) -> tuple[str, ...]:
        """Where the group's crashes landed, each once: `effect.after (kill)`, sorted."""
        return tuple(sorted({place_of(r.case) for r in self.cases}))

    @property
    def summary(self) -> str:
        """The group in one line: cause, the other invariants its cases broke, where it was seen."""
        also = [i for i in self.invariants if i != self.key.root]
        text = self.key.label + (f"; also broke {', '.join(also)}" if also else "")
        return f"{text}; seen at {', '.join(self.places)}"


def steps_of(case_id: str) -> tuple[CrashStep, ...] | None:
    """A case id's crash steps (`Case.parse`, the one parser), or None for an id that does not
    parse (a hand-edited results file): every report reads case ids through this."""
    try:
        return Case.parse(case_id).schedule
    except CaseIdError:
        return None


def faults_of(case_id: str) -> tuple[str, ...]:
    """The fault kinds a case's crash steps use, each once, sorted (none for an unreadable id)."""
    return tuple(sorted({s.fault for s in steps_of(case_id) or ()}))


def place_of(case_id: str) -> str:
    """The kinds of event a case crashed at and its faults, without the exact event:
    `effect.after (kill)`; a deeper schedule joins its steps with `+`."""
    schedule = steps_of(case_id)
    if schedule is None:
        return UNKNOWN
    if not schedule:
        return "with no crash"
    return f"{'+'.join(s.kind for s in schedule)} ({'+'.join(s.fault for s in schedule)})"


def _subject(result: CaseResult, root: str) -> str:
    for v in result.violations:
        if v.get("invariant") == root:
            evidence = v.get("evidence")
            if isinstance(evidence, dict):
                for name in _SUBJECT_FIELDS:
                    if isinstance(evidence.get(name), str) and evidence[name]:
                        return str(evidence[name])
            return ""
    return ""


def group_key(result: CaseResult) -> GroupKey:
    """The root cause of `result` (for any verdict; a passing case has `verdict` pass)."""
    broken = in_report_order(result.invariants)
    if broken:
        return GroupKey(broken[0], _subject(result, broken[0]), result.verdict.value)
    # No invariant: the verdict is the cause, and for a scenario mistake, which kind it is.
    kind = (result.scenario_error or {}).get("kind")
    return GroupKey(result.verdict.value, kind if isinstance(kind, str) else "", result.verdict.value)


def distinct_failures(results: Iterable[CaseResult]) -> list[FailureGroup]:
    """The failing cases (every verdict but pass) by root cause, one group per case: largest group
    first, then by key, so the order does not depend on the order cases finished in."""
    groups: dict[GroupKey, list[CaseResult]] = {}
    for r in results:
        if not r.ok:
            groups.setdefault(group_key(r), []).append(r)
    return [FailureGroup(key, tuple(sorted(cases, key=lambda r: r.case)))
            for key, cases in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))]
