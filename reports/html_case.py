"""One failing case drawn in full: violations, its lanes per incarnation, requests, store and diffs."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from crashmatrix.harness.records.evidence import history
from crashmatrix.harness.records.results import CaseResult
from crashmatrix.reports import cause
from crashmatrix.reports.html_base import clip, e
from crashmatrix.reports.html_diff import render_file

# A lane lists at most this many events of one incarnation when the results carry only the trace
# (older results; a runaway emits thousands): the first ones, the last ones and the crash point.
MAX_EVENTS_HEAD, MAX_EVENTS_TAIL = 100, 50
MAX_MESSAGE = 4000  # characters of one message as shown (the results hold at most about this)


def body(r: CaseResult, anchor: str) -> list[str]:
    """Everything about one case, below its summary line."""
    out = ['<ul class="violations">']
    for v in r.violations:
        out.append(f"<li><code>{e(v.get('invariant', '?'))}</code>: {e(clip(v.get('message', '')))}")
        if v.get("evidence"):
            text = json.dumps(v["evidence"], ensure_ascii=False, sort_keys=True, indent=1, default=str)
            out.append(f"<details><summary>evidence</summary><pre>{e(clip(text))}</pre></details>")
        out.append("</li>")
    out.append("</ul>")
    note = cause.note_shown(r)
    if note:
        out.append(f"<p>note: {e(note)}</p>")
    out += _cause(r)
    out.append(f'<p>reproduce: <code class="repro">{e(r.repro)}</code></p>')
    if r.evidence:
        out += _lanes(r.evidence, anchor)
        out += _files(r.evidence)
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
           f"{e(clip(cause.headline(r.scenario_error)))}</p>"]
    found = cause.details(r.scenario_error)
    if found:
        out.append("<pre>" + e(clip("\n".join(found))) + "</pre>")
    out.append("</div>")
    return out


# -- lanes -----------------------------------------------------------------------------------

def _family(point: str) -> str:
    """The colour family of an event: commit, effect, provider, recovery, inbox or other."""
    kind = point.split(":", 1)[0]
    head = kind.split(".", 1)[0]
    return head if head in ("commit", "effect", "provider", "recovery", "inbox") else "other"


def _end(inc: dict[str, Any]) -> str:
    if inc.get("nondeterministic"):
        return f"nondeterministic: {e(inc['nondeterministic'])}"
    if inc.get("runaway") is not None:
        return f"killed at event {inc['runaway']}: over the step bound (a runaway)"
    if inc.get("crashed_at") is not None:
        return f'<span class="kill">killed (SIGKILL) at event {inc["crashed_at"]}</span>'
    if inc.get("timed_out"):
        return "timed out (killed)"
    return f"exit code {inc.get('exit_code')}"


def _lanes(ev: dict[str, Any], anchor: str) -> list[str]:
    incarnations: list[dict[str, Any]] = ev.get("incarnations") or []
    requests = {(q.get("incarnation"), q.get("event")): (i, q)
                for i, q in enumerate(ev.get("requests") or [])}
    deliveries = {(d.get("incarnation"), d.get("event")): d for d in ev.get("deliveries") or []}
    # A call whose effect took place in more than one incarnation (or twice in one): the double
    # effect the invariants are about, marked on every lane it shows on.
    effects = Counter(x.get("call") for inc in incarnations for x in inc.get("events") or []
                      if x.get("point", "").startswith("effect.after:") and x.get("call"))
    out = ['<div class="lanes"><h4>Timeline, a lane per incarnation</h4>']
    for inc in incarnations:
        index = inc.get("index")
        tag = "settle" if inc.get("settle") else inc.get("command", "?")
        policies = ", ".join(f"{t}={p}" for t, p in sorted((inc.get("policies") or {}).items()))
        out.append(f'<div class="lane" data-incarnation="{e(index)}"><p class="lane-head">'
                   f"<b>incarnation {e(index)}</b> ({e(tag)}; {e(policies)}): {_end(inc)}</p>"
                   '<ol class="events">')
        last = 0
        for x in inc.get("events") or []:
            n = int(x.get("n", 0))
            if n > last + 1:
                out.append(f'<li class="gap">… {n - last - 1} more …</li>')
            last = n
            out.append(_event_chip(inc, x, effects))
            found = requests.get((index, n))
            if found is not None:
                i, q = found
                out.append(f'<li class="req{" bad" if q.get("status") != 200 else ""}">'
                           f'<a href="#{anchor}-r{i}">request #{e(q.get("index"))}: HTTP '
                           f"{e(q.get('status'))}{_fault(q)}</a></li>")
            d = deliveries.get((index, n))
            if d is not None:
                out.append(f'<li class="dlv">delivered {e(d.get("kind"))} {e(d.get("item_id"))}: '
                           f"{e(clip(d.get('text', ''), 80))}</li>")
        total = int(inc.get("events_total", last))
        if total > last:
            out.append(f'<li class="gap">… {total - last} more …</li>')
        out.append("</ol></div>")
    out.append("</div>")
    return out


def _event_chip(inc: dict[str, Any], x: dict[str, Any], effects: Counter[Any]) -> str:
    n, point = int(x.get("n", 0)), str(x.get("point", ""))
    detail = ""
    if x.get("seq") is not None:
        detail = f" seq={x['seq']}"
    if x.get("call"):
        detail = f" {x['call']}" + (" RERUN" if x.get("rerun") else "")
    cls = f"k-{_family(point)}"
    extra = ""
    if point.startswith("effect.after:") and effects.get(x.get("call"), 0) > 1:
        cls += " dup"
        extra = f' <span class="dup-mark">⚠ effect {effects[x.get("call")]}×</span>'
    if inc.get("crashed_at") == n:
        return (f'<li class="{cls} crash" title="SIGKILL here">{n:02d} {e(point)}{e(detail)} ✕ killed'
                f"{extra}</li>")
    return f'<li class="{cls}">{n:02d} {e(point)}{e(detail)}{extra}</li>'


def _fault(q: dict[str, Any]) -> str:
    parts = [f"fault {q['fault']}"] if q.get("fault") else []
    if q.get("error_type"):
        parts.append(str(q["error_type"]))
    return e(" (" + ", ".join(parts) + ")") if parts else ""


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
        fn = c.get("function") or {} if isinstance(c, dict) else {}
        cid = c.get("id", "?") if isinstance(c, dict) else "?"
        parts.append(f'<pre class="call">{e(cid)}: {e(fn.get("name", "?"))}'
                     f"({e(clip(fn.get('arguments', ''), MAX_MESSAGE))})</pre>")
    parts.append("</li>")
    return "".join(parts)


def _requests(ev: dict[str, Any], anchor: str) -> list[str]:
    requests: list[dict[str, Any]] = ev.get("requests") or []
    total = int(ev.get("requests_total", len(requests)))
    if not total:
        return ["<p>No provider requests.</p>"]
    left = f", {total - len(requests)} left out in the middle" if total > len(requests) else ""
    out = [f'<details class="requests"><summary>Provider requests: {total}{left} '
           "(the history each sent, and the reply)</summary>"]
    for i, q in enumerate(requests):
        where = f"incarnation {e(q.get('incarnation'))}" + (
            f", event {e(q['event'])}" if q.get("event") is not None else "")
        rule = f"; rule <code>{e(q['rule'])}</code>" if q.get("rule") else ""
        sent = history(requests, i)
        out.append(f'<div class="request" id="{anchor}-r{i}"><p class="req-head"><b>request '
                   f"#{e(q.get('index'))}</b> ({where}): HTTP {e(q.get('status'))}{_fault(q)}{rule}; "
                   f"{len(sent)} message(s) sent</p>")
        shares = q.get("shares")
        own: list[Any] = q.get("messages") or []
        if shares:
            n = int(shares.get("messages", 0))
            # The part sent before is collapsed, not left out: the whole history is on the page.
            out.append(f"<details><summary>messages 1–{n}: as in request #{e(shares.get('request'))}"
                       f'</summary><ol class="history">{"".join(_message(m) for m in sent[:n])}'
                       "</ol></details>")
            out.append(f'<ol class="history" start="{n + 1}">{"".join(_message(m) for m in own)}</ol>')
        else:
            out.append(f'<ol class="history">{"".join(_message(m) for m in own)}</ol>')
        reply = q.get("reply")
        if reply is not None:
            out.append(f'<p>reply:</p><ul class="reply">{_message(reply)}</ul>')
        out.append("</div>")
    out.append("</details>")
    return out


# -- store and files -------------------------------------------------------------------------

def _store(ev: dict[str, Any]) -> list[str]:
    store: dict[str, Any] = ev.get("store") or {}
    if not store.get("read", True):
        return ["<p>The store: not read (the agent's adapter reads none).</p>"]
    commits: list[dict[str, Any]] = store.get("commits") or []
    incarnations: list[dict[str, Any]] = ev.get("incarnations") or []
    out = [f'<details class="store"><summary>The store as each incarnation left it: '
           f"{int(store.get('commits_total', len(commits)))} commit(s)</summary>",
           '<table class="commits"><thead><tr><th>seq</th><th>by</th><th>label</th><th>entries</th>'
           "</tr></thead><tbody>"]
    rows = iter(commits)
    pending = next(rows, None)
    for k, inc in enumerate(incarnations):
        index = inc.get("index")
        while pending is not None and pending.get("incarnation") == index:
            entries = "<br>".join(e(clip(x, MAX_MESSAGE)) for x in pending.get("entries") or [])
            out.append(f'<tr><td class="n">{e(pending.get("seq"))}</td><td>inc {e(index)}</td>'
                       f"<td><code>{e(pending.get('label') or '')}</code></td><td>{entries}</td></tr>")
            pending = next(rows, None)
        # Where the next incarnation started counting: the store this one left behind.
        left = (incarnations[k + 1].get("commits_before") if k + 1 < len(incarnations)
                else store.get("commits_total", len(commits)))
        out.append(f'<tr class="left"><td colspan="4">↑ as incarnation {e(index)} left it: '
                   f"{e(left)} commit(s)</td></tr>")
    while pending is not None:  # a commit no incarnation's span holds (should not happen)
        out.append(f'<tr><td class="n">{e(pending.get("seq"))}</td><td>?</td><td></td>'
                   f"<td>{'<br>'.join(e(x) for x in pending.get('entries') or [])}</td></tr>")
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


def _files(ev: dict[str, Any]) -> list[str]:
    files: list[dict[str, Any]] = ev.get("files") or []
    if not files:
        return ["<p>No workspace file changed.</p>"]
    out = ['<div class="files"><h4>Workspace files, before → after</h4>']
    for f in files:
        out += render_file(str(f.get("path")), f.get("before"), f.get("after"))
    total = int(ev.get("files_total", len(files)))
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
    return "settle" if i == len(r.trace) - 1 and len(r.trace) == r.depth + 2 else "recover"


def _trace_lanes(r: CaseResult) -> list[str]:
    out = []
    for i, events in enumerate(r.trace):
        crashed = r.crashed_at[i] if i < len(r.crashed_at) else None
        code = r.exit_codes[i] if i < len(r.exit_codes) else None
        end = f"killed at event {crashed}" if crashed is not None else f"exit code {code}"
        out.append(f"<h4>incarnation {i + 1} ({_incarnation_name(r, i)}): {end}</h4>"
                   '<ol class="events">')
        shown = _shown_events(len(events), crashed)
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


def _shown_events(count: int, crashed: int | None) -> set[int]:
    """The event numbers a lane lists: all of a short incarnation; of a long one the first and
    last ones and the crash point."""
    if count <= MAX_EVENTS_HEAD + MAX_EVENTS_TAIL:
        return set(range(1, count + 1))
    shown = set(range(1, MAX_EVENTS_HEAD + 1)) | set(range(count - MAX_EVENTS_TAIL + 1, count + 1))
    if crashed is not None:
        shown.add(crashed)
    return shown


def _hidden_after(n: int, shown: set[int], count: int) -> int:
    """How many events from `n` on are left out, up to the next one listed."""
    end = next((k for k in range(n, count + 1) if k in shown), count + 1)
    return end - n
