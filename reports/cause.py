"""A scenario error's cause as plain text, for every renderer: a headline and detail lines."""

from __future__ import annotations

from typing import Any

from crashmatrix.harness.records.results import CaseResult

WORDS = "scenario error"


def headline(cause: dict[str, Any]) -> str:
    """What went wrong and what to change, in one line (without the messages it lists)."""
    return str(cause.get("headline") or cause.get("message") or "")


def details(cause: dict[str, Any]) -> list[str]:
    """The evidence under the headline: a gap's last messages, a loop's counts."""
    out: list[str] = []
    last = cause.get("last_messages")
    if isinstance(last, list) and last:
        out.append(f"the request's last {len(last)} message(s):")
        out += [f"  {m.get('role')}: {m.get('text')}" for m in last if isinstance(m, dict)]
    rules = cause.get("rules")
    if isinstance(rules, dict) and rules:
        counts = ", ".join(f"{name!r} x{n}" for name, n in rules.items())
        out.append(f"{cause.get('requests')} requests in a row answered with tool calls: {counts}; "
                   f"{cause.get('events')} probe events in inc{cause.get('incarnation')}"
                   + (f" (bound {cause.get('bound')})" if cause.get("bound") is not None else ""))
    return out


def title(r: CaseResult) -> str:
    """`scenario error (script-gap)`, or '' when the case ran into no scenario mistake."""
    if not r.scenario_error:
        return ""
    kind = r.scenario_error.get("kind")
    return f"{WORDS} ({kind})" if kind else WORDS


def lines(r: CaseResult) -> list[str]:
    """The cause as text lines: `scenario error (kind): headline`, then the details, indented."""
    if not r.scenario_error:
        return []
    return [f"{title(r)}: {headline(r.scenario_error)}",
            *(f"  {d}" for d in details(r.scenario_error))]


def note_shown(r: CaseResult) -> str | None:
    """The note, unless it only restates the scenario error, which a renderer shows in full (a
    case's note is then the cause's message, for readers of the note alone)."""
    return None if r.scenario_error else r.note
