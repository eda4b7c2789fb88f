"""The verifier: pure checks of one observed case against the invariants of DESIGN section 6."""

from crashmatrix.harness.verify.checks import CHECKS, Check, verify
from crashmatrix.harness.verify.violation import InvariantId, Violation

__all__ = ["CHECKS", "Check", "InvariantId", "Violation", "verify"]
