"""Renders a session log as a readable transcript: runs, calls, results and recovery marks."""

from __future__ import annotations

import json
from typing import Any

from crashmatrix.agent.log import Commit
from crashmatrix.agent.records import EntryType, Role


def _short(text: Any, width: int = 100) -> str:
    s = " ".join(str(text if text is not None else "").split())
    return s if len(s) <= width else s[: width - 1] + "…"


def render(commits: list[Commit]) -> list[str]:
    lines: list[str] = []
    for c in commits:
        for e in c.entries:
            lines.append(f"{c.seq:>4}  {_entry(e)}")
    return lines


def _entry(e: dict[str, Any]) -> str:
    kind = e.get("type")
    if kind == EntryType.RUN_STARTED:
        if e.get("intent") == "resume":
            return (f"== {e['run_id']} resumes {e.get('resumed_from')} "
                    f"(attempt {e.get('resume_attempt')})")
        return f"== {e['run_id']} started"
    if kind == EntryType.RUN_FINISHED:
        reason = f" ({e['reason']})" if e.get("reason") else ""
        return f"== {e['run_id']} finished: {e['outcome']}{reason}"
    if kind == EntryType.MESSAGE:
        role = e.get("role")
        if role == Role.ASSISTANT:
            calls = e.get("tool_calls") or []
            if not calls:
                return f"assistant: {_short(e.get('content'))}"
            shown = "; ".join(
                f"{c['id']} {c['function']['name']}({_short(c['function']['arguments'], 60)})"
                for c in calls
            )
            return f"assistant calls: {shown}"
        if role == Role.TOOL:
            marks = []
            if e.get("recovered"):
                marks.append(f"RECOVERED:{e['recovered']}")
            if e.get("is_error"):
                marks.append("error")
            if e.get("terminate"):
                marks.append("terminate")
            mark = f" [{', '.join(marks)}]" if marks else ""
            name = e.get("tool_name") or "?"
            return f"result {e.get('tool_call_id')} {name}{mark}: {_short(e.get('content'))}"
        return f"user: {_short(e.get('content'))}"
    if kind == EntryType.TOOL_STARTED:
        args = json.dumps(e.get("args"), ensure_ascii=False)
        return f"started {e['call_id']} {e['tool']} replay={e['replay']} args={_short(args, 60)}"
    if kind == EntryType.RETRY_PENDING:
        return f"retry pending: attempt {e['attempt']} in {e['delay_s']}s ({e['reason']})"
    if kind == EntryType.INPUT_QUEUED:
        return f"input queued {e['input_id']}: {_short(e['text'])}"
    if kind == EntryType.INPUT_CONSUMED:
        return f"input consumed {e['input_id']} as {e['message_id']}"
    if kind == EntryType.NOTICE:
        return f"NOTICE: {e['text']}"
    return json.dumps(e, ensure_ascii=False)
