"""Cases: a scenario plus a crash schedule, and their stable, readable ids.

`changelog/15:effect.after:append_note/kill` crashes the first incarnation at its 15th probe event.
A black-box step counts the agent's system calls on its store instead of probe events (`--black-box`):
`changelog/b03:fsync:session.jsonl/kill` kills the first incarnation as it enters its 3rd `fsync` of
`session.jsonl` (a path relative to the session directory).

A system-call step counts the same calls with the probes still attached (`--syscalls`):
`changelog/05:commit.before:run_started/kill+s02:write:session.jsonl/kill` kills the recovery as it
enters its 2nd `write` of `session.jsonl`, every invariant judged as at a probe event.
A settle step counts them in the settle, the `recover` run on the finished work:
`changelog/f01:pwrite64:session.lock/kill` lets the first incarnation finish the task, then kills
the recover that follows as it enters its first `pwrite64` (of `session.lock`); one more recover
settles.

A downstream step counts the incarnation's requests to the scenario's downstream services:
`refund/d01:create:mail/reply-lost` loses the reply to the first incarnation's first downstream
request, a create on the service `mail` (harness/faults/downstream.py).

Multi-crash schedules join steps with `+`: step i crashes incarnation i (the first incarnation
runs the task; every later one is a `recover`), except a settle step, always the last: the
incarnation before it finishes the work and is not crashed (`Case.step_of`). A case with no
crash is `changelog/none`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# How a plugin (a fault kind, an adapter) may be named: one plain token, as case ids and
# command lines spell it.
PLUGIN_NAME = re.compile(r"^[a-z][a-z0-9-]*$")
# A fault's variant, after its name (`/power-subsets:011`): a plain token too.
VARIANT = re.compile(r"^[a-z0-9]+$")


# The prefix of a black-box step's number: it counts system calls, not probe events.
BLACKBOX_MARK = "b"
# The prefix of a system-call step's number: it counts system calls too, probes attached.
SYSCALL_MARK = "s"
# The prefix of a settle step's: a system-call step in the settle, the recover of finished work.
SETTLE_MARK = "f"
# The prefix of a downstream step's number: it counts requests to downstream services.
DOWNSTREAM_MARK = "d"
MARKS = (BLACKBOX_MARK, DOWNSTREAM_MARK, SYSCALL_MARK, SETTLE_MARK)


class CaseIdError(ValueError):
    pass


@dataclass(frozen=True)
class CrashStep:
    n: int  # probe event number within its incarnation, 1-based
    kind: str
    label: str
    # A registered fault kind's name (crashmatrix.harness.faults); a plain kill by default.
    fault: str = "kill"
    # `n` counts calls of the system call `kind` on the store file `label`, not probe events: the
    # agent runs without probes and is killed as it enters that call (`b03:fsync:session.jsonl`).
    blackbox: bool = False
    # `n` counts the incarnation's downstream requests (`kind` create or status, `label` the
    # service), not probe events: the fake downstream acts at that request (`d01:create:mail`).
    downstream: bool = False
    # `n` counts system calls as for a black-box step, but the agent keeps its probes: every
    # invariant is judged, and the step may crash any incarnation (`s02:write:session.jsonl`).
    syscall: bool = False
    # A system-call step in the settle incarnation (`f01:pwrite64:session.lock`): the incarnation before
    # it finishes the work uncrashed; always the schedule's last step.
    settle: bool = False
    # A system-call step as a recording listed it: which call of `kind` on `label` it is, counted
    # per file (`n` counts per syscall over every file). Not in the id, nor compared: the kill
    # checks it (a count that drifted onto another call of the same file); a step read from an
    # id has none until the recording it came from is at hand (`repro` looks it up).
    ordinal: int | None = field(default=None, compare=False)
    # Which of the states a fault leaves at this point (`power-subsets:011`: which unsynced
    # blocks reached the disk); None for a fault with one state, or the one a variant-less step
    # stands for. Found by running the step without it (`CaseResult.variants`), never guessed.
    variant: str | None = None

    @property
    def at_call(self) -> bool:
        """Killed as the agent enters a system call (black-box or system-call step)."""
        return self.blackbox or self.syscall

    @property
    def point(self) -> str:
        return f"{self.kind}:{self.label}"

    def token(self) -> str:
        mark = (BLACKBOX_MARK if self.blackbox else DOWNSTREAM_MARK if self.downstream
                else SETTLE_MARK if self.settle else SYSCALL_MARK if self.syscall else "")
        variant = "" if self.variant is None else f":{self.variant}"
        return f"{mark}{self.n:02d}:{self.kind}:{self.label}/{self.fault}{variant}"

    @classmethod
    def parse(cls, token: str) -> CrashStep:
        point, sep, named = token.rpartition("/")
        fault, has_variant, variant = named.partition(":")
        parts = point.split(":", 2)
        mark = parts[0][:1] if parts[0][:1] in MARKS else ""
        number = parts[0][len(mark):]
        if not sep or len(parts) != 3 or not number.isdigit():
            raise CaseIdError(f"bad crash step {token!r}: expected NN:kind:label/fault "
                              f"(or bNN:syscall:file/fault, sNN:syscall:file/fault, fNN:syscall:file/fault, "
                              "dNN:kind:service/fault)")
        # Whether the fault is registered is for the registry to say (records import no plugins).
        if not PLUGIN_NAME.match(fault):
            raise CaseIdError(f"bad crash step {token!r}: bad fault name {fault!r}")
        if has_variant and not VARIANT.match(variant):
            raise CaseIdError(f"bad crash step {token!r}: bad variant {variant!r} of fault {fault!r} "
                              "(letters and digits after the colon)")
        return cls(int(number), parts[1], parts[2], fault, mark == BLACKBOX_MARK,
                   mark == DOWNSTREAM_MARK, mark in (SYSCALL_MARK, SETTLE_MARK), mark == SETTLE_MARK,
                   variant=variant if has_variant else None)


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

    @property
    def blackbox(self) -> bool:
        """Crashed at system calls, not probe events: every incarnation runs without probes."""
        return any(s.blackbox for s in self.schedule)

    @property
    def crashes_settle(self) -> bool:
        """Whether its last step crashes the settle (a case no deeper one extends)."""
        return bool(self.schedule) and self.schedule[-1].settle

    def step_of(self, index: int) -> CrashStep | None:
        """The step crashing incarnation `index` (1-based), None for one that runs to its end:
        step i crashes incarnation i, and a settle step the incarnation after the finisher."""
        if self.crashes_settle:
            if index < self.depth:
                return self.schedule[index - 1]
            return self.schedule[-1] if index == self.depth + 1 else None
        return self.schedule[index - 1] if index <= self.depth else None

    def extend(self, step: CrashStep) -> Case:
        return Case(self.scenario, (*self.schedule, step))

    @classmethod
    def parse(cls, case_id: str) -> Case:
        scenario, sep, rest = case_id.partition("/")
        if not sep or not scenario or not rest:
            raise CaseIdError(f"bad case id {case_id!r}: expected SCENARIO/STEP[+STEP...] or SCENARIO/none")
        if rest == "none":
            return cls(scenario)
        schedule = tuple(CrashStep.parse(t) for t in rest.split("+"))
        if any(step.settle for step in schedule[:-1]):
            raise CaseIdError(f"bad case id {case_id!r}: a settle step (fNN) crashes the settle, "
                              "after which nothing is crashed: it can only be the last step")
        return cls(scenario, schedule)
