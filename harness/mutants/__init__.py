"""Mutant agents: faulty variants of the durable agent, patched in at start, that the matrix must kill.

`catalogue` names each mutant and the failure class it stands for; `launch` starts our agent with
one patch applied; `hunt` runs a focused matrix per mutant. The `crashmatrix mutants` command is
in `crashmatrix.harness.cli.mutants`; the adapter that starts a mutant is
`crashmatrix.harness.adapters.mutant`.
"""
