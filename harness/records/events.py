"""Probe events: what an agent reported at one boundary, numbered within its incarnation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ProbeEvent:
    n: int  # 1-based index within its incarnation
    kind: str
    label: str
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def point(self) -> str:
        return f"{self.kind}:{self.label}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"n": self.n, "kind": self.kind, "label": self.label}
        if self.detail:
            out["detail"] = self.detail
        return out
