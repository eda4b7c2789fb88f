"""One failing case drawn in full: violations, its lanes, requests, store and diffs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from crashmatrix.harness.records.case import Case, CaseIdError
from crashmatrix.harness.records.clip import clip, head_tail
from crashmatrix.harness.records.evidence import MAX_TEXT as MAX_RECORDED
from crashmatrix.harness.records.results import CaseResult
from crashmatrix.reports import cause
from crashmatrix.reports.agent_output import tails
from crashmatrix.reports.html_base import MAX_TEXT, e, number
from crashmatrix.reports.html_diff import render_file, repeated_records
from crashmatrix.reports.html_lanes import fault_of, lanes

# A lane lists at most this many events of one incarnation when the results carry only the trace
# (older results; a runaway emits thousands): the first ones, the last ones and the crash point.
MAX_EVENTS_HEAD, MAX_EVENTS_TAIL = 100, 50
# Characters of one message as shown: what the results hold (evidence clips at MAX_RECORDED and
# says so), with room for that note, so that a recorded message is never clipped twice.
MAX_MESSAGE = MAX_RECORDED + 64


def body(r: CaseResult, anchor: str) -> list[str]:
    """Everything about one case, below its summary line."""
    out = ['<ul class="violations">']
    for v in r.violations:
        out.append(f"<li><code>{e(v.get('invariant', '?'))}</code>: "
                   f"{e(clip(v.get('message', ''), MAX_TEXT))}")
        if v.get("evidence"):
            text = json.dumps(v["evidence"], ensure_ascii=False, sort_keys=True, indent=1, default=str)
            out.append(f"<details><summary>evidence</summary><pre>{e(clip(text, MAX_TEXT))}</pre></details>")
        out.append("</li>")
    out.append("</ul>")
    note = cause.note_shown(r)
    if note:
        out.append(f"<p>note: {e(note)}</p>")
    out += _cause(r)
    out.append(f'<p>reproduce: <code class="repro">{e(r.repro)}</code></p>')
    out += _agent_output(r)
    if isinstance(r.evidence, dict):
        out += lanes(r.evidence, anchor, [v for v in r.violations if isinstance(v, dict)])
        out += _files(r.evidence, repeated_records(r.violations))
        out += _requests(r.evidence, anchor)
        out += _store(r.evidence)
    else:
        out += _trace_lanes(r)
    return out


def _cause(r: CaseResult) -> list[str]:
    """A scenario error's cause: its headline, then the evidence (a gap's last messages)."""
    if not r.scenario_error:
        return []
    out = [f'<div class="cause"><p><b>{e(cause.title(r))}</b>: '
           f"{e(clip(cause.headline(r.scenario_error), MAX_TEXT))}</p>"]
    found = cause.details(r.scenario_error)
    if found:
        out.append("<pre>" + e(clip("\n".join(found), MAX_TEXT)) + "</pre>")
    out.append("</div>")
    return out


def _agent_output(r: CaseResult) -> list[str]:
    """The last lines each incarnation printed, folded: there when wanted (an agent that could
    not start says why only there), out of the way of the timeline otherwise."""
    found = tails(r)
    if not found:
        return []
    which = ", ".join(f"inc{t.incarnation}" for t in found)
    out = [f'<details class="output"><summary>Agent output: the last lines of {e(which)} '
           "(stdout and stderr)</summary>"]
    for t in found:
        # Clipped again only for a hand-edited file: a recorded tail is within MAX_MESSAGE.
        out.append(f"<h4>incarnation {e(t.incarnation)}</h4>"
                   f"<pre>{e(clip(t.text, MAX_MESSAGE, keep_end=True))}</pre>")
    out.append("</details>")
    return out


# -- requests --------------------------------------------------------------------------------

def _message(m: Any) -> str:
    if not isinstance(m, dict):
        return f'<li class="msg"><pre>{e(clip(m, MAX_MESSAGE))}</pre></li>'
    role = str(m.get("role", "?"))
    head = role + (f" → {m['tool_call_id']}" if m.get("tool_call_id") else "")
    text = m.get("content")
    parts = [f'<li class="msg m-{e(role)}"><span class="role">{e(head)}</span>']
    if text not in (None, ""):
        shown = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False, sort_keys=True)
        parts.append(f"<pre>{e(clip(shown, MAX_MESSAGE))}</pre>")
    for c in m.get("tool_calls") or []:
        fn = (c.get("function") or {}) if isinstance(c, dict) else {}
        fn = fn if isinstance(fn, dict) else {}
        cid = c.get("id", "?") if isinstance(c, dict) else "?"
        parts.append(f'<pre class="call">{e(cid)}: {e(fn.get("name", "?"))}'
                     f"({e(clip(fn.get('arguments', ''), MAX_MESSAGE))})</pre>")
    parts.append("</li>")
    return "".join(parts)


def _origins(requests: list[dict[str, Any]]) -> list[list[int]]:
    """For each request, for each message of the history it sent, the request (its position in
    the list) that shows that message: a request shows only what it added, and points back to
    where the rest is, so a page does not grow with the square of a history."""
    out: list[list[int]] = []
    for i, q in enumerate(requests):
        shares = q.get("shares") if i else None
        shared = number(shares.get("messages")) or 0 if isinstance(shares, dict) else 0
        before = out[i - 1][:shared] if i else []
        out.append(before + [i] * len(q.get("messages") or []))
    return out


def _shared(origin: list[int], own_from: int, requests: list[dict[str, Any]], anchor: str) -> str:
    """Where the messages a request shares with earlier ones are shown: a link per run of them."""
    parts: list[str] = []
    start = 0
    while start < own_from:
        end = start
        while end < own_from and origin[end] == origin[start]:
            end += 1
        k = origin[start]
        parts.append(f'messages {start + 1}–{end}: as in <a href="#{anchor}-r{k}">request '
                     f"#{e(requests[k].get('index'))}</a>")
        start = end
    return f'<p class="shared">{"; ".join(parts)}</p>'


def _requests(ev: dict[str, Any], anchor: str) -> list[str]:
    requests: list[dict[str, Any]] = [q for q in ev.get("requests") or [] if isinstance(q, dict)]
    total = number(ev.get("requests_total"))
    total = len(requests) if total is None else total
    if not total:
        return ["<p>No provider requests.</p>"]
    left = f", {total - len(requests)} left out in the middle" if total > len(requests) else ""
    out = [f'<details class="requests"><summary>Provider requests: {total}{left} '
           "(the messages each added to the history, and the reply)</summary>"]
    origins = _origins(requests)
    for i, q in enumerate(requests):
        if q.get("intruder") is not None:
            where = f"second process {e(q['intruder'])}"
        else:
            where = f"incarnation {e(q.get('incarnation'))}"
        if q.get("event") is not None:
            where += f", event {e(q['event'])}"
        rule = f"; rule <code>{e(q['rule'])}</code>" if q.get("rule") else ""
        own: list[Any] = q.get("messages") or []
        shared = len(origins[i]) - len(own)
        out.append(f'<div class="request" id="{anchor}-r{i}"><p class="req-head"><b>request '
                   f"#{e(q.get('index'))}</b> ({where}): HTTP {e(q.get('status'))}{fault_of(q)}{rule}; "
                   f"{len(origins[i])} message(s) sent</p>")
        if shared:
            out.append(_shared(origins[i], shared, requests, anchor))
        out.append(f'<ol class="history" start="{shared + 1}">{"".join(_message(m) for m in own)}</ol>')
        reply = q.get("reply")
        if reply is not None:
            out.append(f'<p>reply:</p><ul class="reply">{_message(reply)}</ul>')
        out.append("</div>")
    out.append("</details>")
    return out


# -- store and files -------------------------------------------------------------------------

def _commit_row(c: dict[str, Any], by: str) -> str:
    entries = "<br>".join(e(clip(x, MAX_MESSAGE)) for x in c.get("entries") or [])
    return (f'<tr><td class="n">{e(c.get("seq"))}</td><td>{by}</td>'
            f"<td><code>{e(c.get('label') or '')}</code></td><td>{entries}</td></tr>")


def _store(ev: dict[str, Any]) -> list[str]:
    store: dict[str, Any] = ev.get("store") or {}
    if not store.get("read", True):
        return ["<p>The store: not read (the agent's adapter reads none).</p>"]
    commits: list[dict[str, Any]] = store.get("commits") or []
    incarnations: list[dict[str, Any]] = ev.get("incarnations") or []
    total = number(store.get("commits_total"))
    total = len(commits) if total is None else total
    out = [f'<details class="store"><summary>The store as each incarnation left it: '
           f"{total} commit(s)</summary>",
           '<table class="commits"><thead><tr><th>seq</th><th>by</th><th>label</th><th>entries</th>'
           "</tr></thead><tbody>"]
    rows = iter(commits)
    pending = next(rows, None)
    for k, inc in enumerate(incarnations):
        index = inc.get("index")
        # An intruder's commits sit among its holder's, where the log has them.
        while pending is not None and (pending.get("incarnation") == index or (
                pending.get("incarnation") is None and pending.get("intruder") is not None)):
            by = (f"inc {e(index)}" if pending.get("intruder") is None
                  else f"second process {e(pending['intruder'])}")
            out.append(_commit_row(pending, by))
            pending = next(rows, None)
        # Where the next incarnation started counting: the store this one left behind.
        left = incarnations[k + 1].get("commits_before") if k + 1 < len(incarnations) else total
        out.append(f'<tr class="left"><td colspan="4">↑ as incarnation {e(index)} left it: '
                   f"{e(left)} commit(s)</td></tr>")
    while pending is not None:  # a commit no incarnation's span holds (should not happen)
        out.append(_commit_row(pending, "?"))
        pending = next(rows, None)
    out.append("</tbody></table>")
    runs = store.get("runs") or []
    if runs:
        out.append("<p>runs: " + "; ".join(
            f"<code>{e(r.get('run_id'))}</code> ({e(r.get('intent'))}) → {e(r.get('outcome') or 'OPEN')}"
            + (f" ({e(r['reason'])})" if r.get("reason") else "") for r in runs) + "</p>")
    for name in ("integrity_error", "torn_tail"):
        if store.get(name):
            out.append(f"<p>{name.replace('_', ' ')}: {e(store[name])}</p>")
    out.append("</details>")
    return out


def _files(ev: dict[str, Any], repeated: Mapping[str, tuple[int, ...]]) -> list[str]:
    files: list[dict[str, Any]] = [f for f in ev.get("files") or [] if isinstance(f, dict)]
    if not files:
        return ["<p>No workspace file changed.</p>"]
    out = ['<div class="files"><h4>Workspace files, before → after</h4>']
    for f in files:
        cut = f.get("truncated")
        out += render_file(str(f.get("path")), f.get("before"), f.get("after"),
                           cut if isinstance(cut, dict) else None, repeated.get(str(f.get("path")), ()))
    total = number(ev.get("files_total")) or len(files)
    if total > len(files):
        out.append(f"<p>{total - len(files)} more changed file(s) left out.</p>")
    out.append("</div>")
    return out


# -- results without evidence (older versions): the trace only ---------------------------------

def _incarnation_name(r: CaseResult, i: int) -> str:
    # Incarnation 0 runs the task, one `recover` follows each crash, and the last is the settle
    # run when the case got that far (depth + 2 incarnations in all).
    if i == 0:
        return "run"
    if i == len(r.trace) - 1 and len(r.trace) == r.depth + 2:
        return "settle"
    # A settle step's case: the incarnation after the finisher is the settle it crashed.
    return "settle, crashed" if i == r.depth and _crashes_settle(r.case) else "recover"


def _crashes_settle(case_id: str) -> bool:
    try:
        return Case.parse(case_id).crashes_settle
    except CaseIdError:
        return False


def _trace_lanes(r: CaseResult) -> list[str]:
    out = []
    for i, events in enumerate(r.trace):
        crashed = number(r.crashed_at[i]) if i < len(r.crashed_at) else None
        code = r.exit_codes[i] if i < len(r.exit_codes) else None
        end = f"killed at event {crashed}" if crashed is not None else f"exit code {e(code)}"
        out.append(f"<h4>incarnation {i + 1} ({_incarnation_name(r, i)}): {end}</h4>"
                   '<ol class="events">')
        shown = {k + 1 for k in head_tail(len(events), MAX_EVENTS_HEAD, MAX_EVENTS_TAIL,
                                           [None if crashed is None else crashed - 1])}
        for n, event in enumerate(events, 1):
            if n not in shown:
                if n - 1 in shown:
                    out.append(f'<li class="gap">… {_hidden_after(n, shown, len(events))} more …</li>')
                continue
            if n == crashed:
                out.append(f'<li class="crash" title="SIGKILL here">{n:02d} {e(event)} ✕ killed</li>')
            else:
                out.append(f"<li>{n:02d} {e(event)}</li>")
        out.append("</ol>")
    return out


def _hidden_after(n: int, shown: set[int], count: int) -> int:
    """How many events from `n` on are left out, up to the next one listed."""
    end = next((k for k in range(n, count + 1) if k in shown), count + 1)
    return end - n
