"""Mutant agents: faulty variants of the durable agent, patched in at start, that the matrix must kill.

`catalogue` names each mutant and the failure class it stands for; `launch` starts our agent with
one patch applied. They sit below the adapters (`crashmatrix.harness.adapters.mutant` starts a
mutant); the hunt, a focused matrix per mutant, is execution (`crashmatrix.harness.execution.hunt`);
the `crashmatrix mutants` command is in `crashmatrix.harness.cli.mutants`.
"""
