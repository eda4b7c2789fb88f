"""Fault kinds: the contract (`interface`), the registry, and one module per built-in kind.

Built-ins, registered in pyproject.toml exactly as a third party registers its own: `kill`
(SIGKILL at any event), `torn` (killed mid-commit, the last write torn), `second` (frozen,
while a second process is started on the session) and `power`, `power-keep1`, `power-names`,
`power-blocks` (killed at a commit boundary or, with `--syscalls`, a system call, then the
session's files set to what a power loss leaves, in one of the orders a file system may persist
things in: `power_state`, pure; not in the default set) and `power-subsets` (every subset of the
unsynced blocks, a sibling case each: `power_subsets`).
"""
