"""Cases: a scenario plus a crash schedule, and their stable, readable ids.

`changelog/07:effect.after:append_note/kill` crashes the first incarnation at its 7th probe event.
Multi-crash schedules join steps with `+`: step i crashes incarnation i (the first incarnation
runs the task; every later one is a `recover`). A case with no crash is `changelog/none`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class FaultKind(StrEnum):
    KILL = "kill"  # SIGKILL of the agent's process group at the probe
    # SIGKILL at commit.written, then the half-written commit is torn: the store keeps only part
    # of the last line, as a crash in the middle of the write (or a power loss) would leave it.
    TORN = "torn"


class CaseIdError(ValueError):
    pass


@dataclass(frozen=True)
class CrashStep:
    n: int  # probe event number within its incarnation, 1-based
    kind: str
    label: str
    fault: FaultKind = FaultKind.KILL

    @property
    def point(self) -> str:
        return f"{self.kind}:{self.label}"

    def token(self) -> str:
        return f"{self.n:02d}:{self.kind}:{self.label}/{self.fault.value}"

    @classmethod
    def parse(cls, token: str) -> CrashStep:
        point, sep, fault = token.rpartition("/")
        parts = point.split(":", 2)
        if not sep or len(parts) != 3 or not parts[0].isdigit():
            raise CaseIdError(f"bad crash step {token!r}: expected NN:kind:label/fault")
        try:
            kind = FaultKind(fault)
        except ValueError:
            known = ", ".join(f.value for f in FaultKind)
            raise CaseIdError(f"bad crash step {token!r}: unknown fault {fault!r} (known: {known})") from None
        return cls(int(parts[0]), parts[1], parts[2], kind)


@dataclass(frozen=True)
class Case:
    scenario: str
    schedule: tuple[CrashStep, ...] = ()

    @property
    def case_id(self) -> str:
        steps = "+".join(s.token() for s in self.schedule) if self.schedule else "none"
        return f"{self.scenario}/{steps}"

    @property
    def depth(self) -> int:
        return len(self.schedule)

    def extend(self, step: CrashStep) -> Case:
        return Case(self.scenario, (*self.schedule, step))

    @classmethod
    def parse(cls, case_id: str) -> Case:
        scenario, sep, rest = case_id.partition("/")
        if not sep or not scenario or not rest:
            raise CaseIdError(f"bad case id {case_id!r}: expected SCENARIO/STEP[+STEP...] or SCENARIO/none")
        if rest == "none":
            return cls(scenario)
        return cls(scenario, tuple(CrashStep.parse(t) for t in rest.split("+")))
