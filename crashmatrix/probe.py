"""The probe client for any Python agent: `from crashmatrix.probe import probe` (stdlib only).

Call `probe(kind, label, **detail)` at each boundary your agent crosses (docs/probe-protocol.md
lists the kinds); it returns at once when no harness is attached, and otherwise waits for the
harness's permit, which is how a crash lands exactly there. `ProbeDetached` means the harness is
gone: take no further step. It wraps the client our reference agent uses, and like it may be
called from any thread (each event is sent whole, with its permit, before the next).
"""

from __future__ import annotations

import threading
from typing import Any

from crashmatrix.agent import probe as _client
from crashmatrix.agent.probe import ProbeDetached, ProbeKind

__all__ = ["ProbeDetached", "ProbeKind", "probe"]


_attached = False
_attaching = threading.Lock()


def probe(kind: ProbeKind | str, label: str, **detail: Any) -> None:
    """Report one boundary event (`kind` as a ProbeKind or its text, e.g. "effect.after")."""
    global _attached
    if not _attached:
        # On first use, in the process that probes (a forked child has its own environment);
        # once, however many threads probe first.
        with _attaching:
            if not _attached:
                _client.attach_from_env()
                _attached = True
    _client.probe(ProbeKind(kind), label, **detail)
