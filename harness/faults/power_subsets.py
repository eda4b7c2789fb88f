"""`power-subsets`: a power loss that keeps any subset of the unsynced blocks, not only a prefix.

A file system does not promise that unsynced writes reach the disk in the order they were made:
its page cache writes dirty 4 KiB pages back whole, in any order, and a file's new length may be
stored with a later block while an earlier one never was (ALICE's "append reordering", at the
block granularity CrashMonkey replays). `power`, `power-keep1` and `power-blocks` each try one
order of the data; this fault tries every order of the blocks (names stay strict: `power-names`
is the other order of those). Where it is enumerated (as `power`: `commit.written`,
`commit.after`, and each system-call point with `--syscalls`), it runs in two steps:

- the variant-less step (`.../power-subsets`) is the loss that keeps none of the blocks (the
  state `power` leaves), and counts the unsynced blocks a subset may keep (`subset_blocks`:
  those appends to modelled files with durable names dirtied, by first write);
- it offers a variant per subset (`.../power-subsets:011`: the first block dropped, the next two
  kept, bit i for the i-th block), each a sibling case the matrix runs next, with the kept
  blocks on disk, the dropped ones before the last kept one as of their last sync (zeros past
  the synced length), and the rest cut off. Two writes into one block stay together.

Up to `EVERY_SUBSET_UP_TO` blocks every non-empty subset is a variant (2^n - 1); past that, the
subsets that keep one block alone and those that drop one block alone (2n): the number of cases
stays linear where a big group would make it explode (README and `docs/architecture.md` say
where the cut is).

A variant replayed on a run that left another number of blocks than it was enumerated from is
`nondeterministic`, never judged on a state it was not meant to reach.
"""

from __future__ import annotations

import itertools

from crashmatrix.harness.faults.interface import Observed
from crashmatrix.harness.faults.power import Power, note_state, write_state
from crashmatrix.harness.faults.power_state import MaskMismatch, power_state

# Every subset up to this many unsynced blocks (15 variants); past it, 2n of them.
EVERY_SUBSET_UP_TO = 4


def masks(n: int) -> list[str]:
    """The variants for `n` unsynced blocks, in a stable order. Pure."""
    if n <= EVERY_SUBSET_UP_TO:
        return ["".join(bits) for bits in itertools.product("01", repeat=n)][1:]
    alone = ["".join("1" if j == i else "0" for j in range(n)) for i in range(n)]
    all_but = ["".join("0" if j == i else "1" for j in range(n)) for i in range(n)]
    return sorted({*alone, *all_but})


class PowerSubsets(Power):
    """`power` with variants: where and what it needs are `power`'s; what stays is the mask's."""

    has_variants = True  # names each subset by a mask (`power-subsets:011`)

    def __init__(self) -> None:
        super().__init__("power-subsets", keep=0)

    def apply_observed(self, observed: Observed) -> None:
        mask = observed.variant
        try:
            state = power_state(observed.calls, observed.before, mask=mask)
        except MaskMismatch as exc:
            observed.drifted(f"power-subsets:{mask} does not fit this run: {exc}")
            return
        write_state(state)
        if mask is not None:
            note_state(observed, state)
            return
        variants = masks(state.subset_blocks)
        observed.offer(variants)
        note_state(observed, state, f"power loss: none of the {state.subset_blocks} unsynced block(s) a "
                   f"subset may keep reached the disk; {len(variants)} other subset(s) run as sibling "
                   "cases (power-subsets:MASK)")


POWER_SUBSETS = PowerSubsets()
