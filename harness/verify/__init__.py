"""The verifier: pure checks of one observed case against the invariants (docs/invariants.md)."""

from crashmatrix.harness.records.violation import InvariantId, Violation
from crashmatrix.harness.verify.checks import CHECKS, Check, Judgement, judge, verify

__all__ = ["CHECKS", "Check", "InvariantId", "Judgement", "Violation", "judge", "verify"]
