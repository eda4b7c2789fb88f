"""The probe client for any Python agent: `from crashmatrix.probe import probe` (stdlib only).

Call `probe(kind, label, **detail)` at each boundary your agent crosses (docs/probe-protocol.md
lists the kinds); it returns at once when no harness is attached, and otherwise waits for the
harness's permit, which is how a crash lands exactly there. `ProbeDetached` means the harness is
gone: take no further step. It wraps the client our reference agent uses.
"""

from __future__ import annotations

from typing import Any

from crashmatrix.agent import probe as _client
from crashmatrix.agent.probe import ProbeDetached, ProbeKind

__all__ = ["ProbeDetached", "ProbeKind", "probe"]


_attached = False


def probe(kind: ProbeKind | str, label: str, **detail: Any) -> None:
    """Report one boundary event (`kind` as a ProbeKind or its text, e.g. "effect.after")."""
    global _attached
    if not _attached:
        # On first use, in the process that probes (a forked child has its own environment).
        _client.attach_from_env()
        _attached = True
    _client.probe(ProbeKind(kind), label, **detail)
