"""Faults at downstream requests: the reply lost, the agent killed in flight, a 5xx, a timeout.

Their crash points are the requests an incarnation made to the scenario's downstream services
(`d02:create:mail/reply-lost`: the incarnation's 2nd downstream request, a create on `mail`), not
probe events. The fake downstream carries each out on the request itself (fakes/downstream.py,
`Injection`, made from the fault by the runner): it processes the request or not, then loses,
holds or fails its reply, or has the harness kill the agent before the reply reaches it. Only
the kill ends the incarnation; with the others the agent learns of a failure (or of nothing)
and runs on: what it does next is judged.
"""

from __future__ import annotations

from dataclasses import dataclass

from crashmatrix.harness.adapters.interface import Adapter, Capability, LaunchSpec
from crashmatrix.harness.faults.interface import AtCrash, Frozen, Observed, ReplyFate

CREATE = "create"  # a request to the service's create endpoint
STATUS = "status"  # a status query


@dataclass(frozen=True)
class DownstreamFault:
    name: str
    applies: bool
    fate: ReplyFate
    status: int
    kinds: frozenset[str]  # the request kinds it is enumerated at
    requires: frozenset[Capability] = frozenset()
    at_crash: AtCrash = AtCrash.DOWNSTREAM
    observes: bool = False
    by_default: bool = True  # only scenarios with services have downstream requests
    at_store_calls: bool = False

    def enumerated_at(self, kind: str, label: str) -> bool:
        """At a downstream request of this kind (`create`, `status`) to service `label`."""
        return kind in self.kinds

    def apply(self, adapter: Adapter, spec: LaunchSpec) -> None:
        pass  # the fake downstream did it all, at the request

    def while_frozen(self, frozen: Frozen) -> None:
        pass  # never frozen

    def apply_observed(self, observed: Observed) -> None:
        pass  # never observes


def _fault(name: str, applies: bool, fate: ReplyFate, *kinds: str, status: int = 503,
           requires: frozenset[Capability] = frozenset()) -> DownstreamFault:
    return DownstreamFault(name, applies, fate, status, frozenset(kinds), requires)


# Applied, then the connection reset before any reply: the classic unknown outcome. At a status
# query, the answer is lost the same way.
REPLY_LOST = _fault("reply-lost", True, ReplyFate.RESET, CREATE, STATUS)
# Applied, then the agent SIGKILLed before the reply reached it: recovery meets an operation that
# happened and a store that never heard of its result.
KILL_AFTER_APPLY = _fault("kill-after-apply", True, ReplyFate.KILL, CREATE,
                          requires=frozenset({Capability.KILL}))
# Applied, then a 500 (a gateway failing after the service committed): the error is not the truth.
ERROR_AFTER_APPLY = _fault("error-after-apply", True, ReplyFate.ERROR, CREATE, status=500)
# A 503 before anything applied: a retry must happen, and may (keyed or not) apply once.
ERROR_BEFORE_APPLY = _fault("error-before-apply", False, ReplyFate.ERROR, CREATE, STATUS)
# Applied, then no reply until the client gives up: an agent without a client timeout hangs.
TIMEOUT = _fault("timeout", True, ReplyFate.HOLD, CREATE)
