"""`second`: a second process on the session: the incarnation is frozen, another one started beside it.

At the crash point the incarnation is stopped (SIGSTOP of its group, its session lock held), a
second incarnation is started on the same session with the command a restart would run, and
waited for; then the first is resumed (SIGCONT) and runs to its end. One writer per session is
expected: the second is refused, names the holder, and changes nothing (`one-writer`).

Enumerated where a second writer does damage at once, not at every event (which would double
the matrix for a lock that, in a correct agent, is held the same way at all of them):
- `commit.before`: the holder is about to append; a second writer's commits between its read of
  the log and its append give two commits one sequence number;
- `effect.before`: the holder is about to act on an intent it recorded; a second process that
  recovers finds the call unanswered and decides its outcome (unknown, or a re-run) while the
  holder is about to run it;
- `provider.before`: the holder is about to ask the model; a second one asks too, and both act
  on the answers.
"""

from __future__ import annotations

from crashmatrix.harness.adapters.interface import Adapter, Capability, LaunchSpec
from crashmatrix.harness.faults.interface import AtCrash, Frozen, Observed

SECOND_AT = frozenset({"commit.before", "effect.before", "provider.before"})


class Second:
    name = "second"
    requires = frozenset({Capability.KILL, Capability.CONCURRENT})
    at_crash = AtCrash.FREEZE
    observes = False
    by_default = True
    at_store_calls = False  # it freezes at probe events

    def enumerated_at(self, kind: str, label: str) -> bool:
        return kind in SECOND_AT

    def apply(self, adapter: Adapter, spec: LaunchSpec) -> None:
        pass  # never killed: see while_frozen

    def while_frozen(self, frozen: Frozen) -> None:
        frozen.start_second()

    def apply_observed(self, observed: Observed) -> None:
        pass  # never observes


SECOND = Second()
