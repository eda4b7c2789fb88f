"""The messages-only baseline as an agent of its own: `crashmatrix run --agent messages-only`.

It persists the chat history and nothing else (no intent, no recovery rules), the way many agent
loops do; a matrix against it shows what durability adds. It is our agent with the catalogue's
`messages-only` patch, started through the mutant launcher.
"""

from __future__ import annotations

from crashmatrix.harness.adapters.mutant import MutantAdapter
from crashmatrix.harness.mutants.catalogue import MutantName

ADAPTER = MutantAdapter(MutantName.MESSAGES_ONLY, name="messages-only")
