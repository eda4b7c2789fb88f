"""A failing case's timeline: a lane per incarnation, a lane per second process, doubled effects marked."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from crashmatrix.harness.records.clip import clip
from crashmatrix.reports.html_base import e, number

MAX_DELIVERY = 80  # characters of a delivered input shown on a lane
MAX_OUTPUT = 2000  # characters of a second process's output shown under its lane
AT_MOST_ONCE = "at-most-once"


def _family(point: str) -> str:
    """The colour family of an event: commit, effect, provider, recovery, inbox or other."""
    kind = point.split(":", 1)[0]
    head = kind.split(".", 1)[0]
    return head if head in ("commit", "effect", "provider", "recovery", "inbox") else "other"


def end_of(inc: dict[str, Any]) -> str:
    """How an incarnation ended, as HTML: every value from the results file escaped."""
    if inc.get("nondeterministic"):
        return f"nondeterministic: {e(inc['nondeterministic'])}"
    if inc.get("runaway") is not None:
        return f"killed at event {e(inc['runaway'])}: over the step bound (a runaway)"
    if inc.get("crashed_at") is not None:
        return f'<span class="kill">killed (SIGKILL) at event {e(inc["crashed_at"])}</span>'
    if inc.get("killed_at_call") is not None:  # black-box: no probe event, a system call
        return f'<span class="kill">killed (SIGKILL) entering {e(inc["killed_at_call"])}</span>'
    if inc.get("killed_at_request") is not None:  # by the fake downstream, the reply unsent
        return (f'<span class="kill">killed (SIGKILL) at {e(inc["killed_at_request"])}, before '
                "its reply</span>")
    if inc.get("timed_out"):
        return "timed out (killed)"
    ended = f"exit code {e(inc.get('exit_code'))}"
    if inc.get("downstream_fault"):  # the downstream lost, failed or held a reply; it ran on
        ended = f'<span class="kill">{e(inc["downstream_fault"])}</span>; {ended}'
    if inc.get("injected"):  # a storage call strace made fail (or come up short); it ran on
        done = "failed" if inc.get("must_stop") else "cut short"
        ended = (f'<span class="kill">{done} by strace: {e(inc["injected"])}</span>'
                 f"{' (it must stop on its own)' if inc.get('must_stop') else ''}; {ended}")
    return ended


class Doubles:
    """Which effect chips to mark as an effect that ran more than once.

    A call id is unique only within one model response (an agent may name every call `call_0`),
    so effects are counted by the result id the call reserved, unique in the session, where the
    probe reports one (`result`). An event without one is marked only when an at-most-once
    violation names it, by its event or its call id: the verifier has already told the calls apart.
    """

    def __init__(self, lanes: Sequence[dict[str, Any]], violations: Sequence[dict[str, Any]]) -> None:
        after = [x for lane in lanes for x in lane.get("events") or []
                 if str(x.get("point", "")).startswith("effect.after:")]
        self.by_result = Counter(str(x["result"]) for x in after if x.get("result") is not None)
        self.refs: set[str] = set()
        calls: set[str] = set()
        for v in violations:
            found = v.get("evidence")
            if v.get("invariant") != AT_MOST_ONCE or not isinstance(found, dict):
                continue
            self.refs.update(str(r) for r in found.get("events") or [] if isinstance(r, str))
            calls.update(str(c) for c in [*(found.get("call_ids") or []), found.get("call_id")]
                         if c is not None)
        self.by_call = Counter(str(x["call"]) for x in after
                               if x.get("result") is None and str(x.get("call")) in calls)

    def times(self, ref: str, x: dict[str, Any]) -> int:
        """How often the effect of chip `x` (event `ref`, `inc2#7`) ran, when more than once; else 0."""
        if x.get("result") is not None:
            n = self.by_result[str(x["result"])]
            return n if n > 1 and str(x.get("point", "")).startswith("effect.after:") else 0
        if ref in self.refs:
            return max(2, self.by_call[str(x.get("call"))])
        if str(x.get("point", "")).startswith("effect.after:"):
            n = self.by_call[str(x.get("call"))]
            return n if n > 1 else 0
        return 0


Requests = dict[tuple[Any, int, Any], tuple[int, dict[str, Any]]]


def lanes(ev: dict[str, Any], anchor: str, violations: Sequence[dict[str, Any]]) -> list[str]:
    incarnations: list[dict[str, Any]] = ev.get("incarnations") or []
    intrusions: list[dict[str, Any]] = ev.get("intrusions") or []
    # A request sits on the lane of the process that sent it: an incarnation, or an intruder.
    requests: Requests = {(q.get("incarnation"), number(q.get("intruder")) or 0, q.get("event")): (i, q)
                          for i, q in enumerate(ev.get("requests") or [])}
    doubles = Doubles([*incarnations, *intrusions], violations)
    out = ['<div class="lanes"><h4>Timeline, a lane per incarnation</h4>']
    for inc in incarnations:
        mine = [(j, x) for j, x in enumerate(intrusions, 1) if x.get("holder") == inc.get("index")]
        out += _lane(inc, mine, anchor, requests, ev.get("deliveries") or [], doubles)
        for j, x in mine:
            out += _intruder_lane(j, x, anchor, requests, doubles)
    out.append("</div>")
    return out


def _lane(inc: dict[str, Any], mine: list[tuple[int, dict[str, Any]]], anchor: str,
          requests: Requests, deliveries: list[dict[str, Any]], doubles: Doubles) -> list[str]:
    index = inc.get("index")
    frozen = number(inc.get("frozen_at"))
    crashed = number(inc.get("crashed_at"))
    delivered = {d.get("event"): d for d in deliveries if d.get("incarnation") == index}

    def item(n: int, x: dict[str, Any]) -> list[str]:
        out = [_chip(n, x, doubles.times(f"inc{index}#{n}", x), crashed == n)]
        if frozen == n:  # stopped at the probe event, before whatever follows it (a request)
            links = ", ".join(f'<a href="#{anchor}-x{j}">second process {j}</a>' for j, _ in mine)
            out.append('<li class="frozen" title="SIGSTOP here">❄ frozen (SIGSTOP) here'
                       f"{'; ' + links + ' ran meanwhile' if links else ''}; then resumed</li>")
        out += _request_chip(requests.get((index, 0, n)), anchor)
        d = delivered.get(n)
        if d is not None:
            out.append(f'<li class="dlv">delivered {e(d.get("kind"))} {e(d.get("item_id"))}: '
                       f"{e(clip(d.get('text', ''), MAX_DELIVERY))}</li>")
        return out

    tag = "settle" if inc.get("settle") else inc.get("command", "?")
    return [f'<div class="lane" data-incarnation="{e(index)}"><p class="lane-head">'
            f"<b>incarnation {e(index)}</b> ({e(tag)}; {_policies(inc)}): {end_of(inc)}</p>"
            '<ol class="events">', *_events(inc, item), "</ol></div>"]


def _policies(inc: dict[str, Any]) -> str:
    return e(", ".join(f"{t}={p}" for t, p in sorted((inc.get("policies") or {}).items())))


def _events(lane: dict[str, Any], item: Callable[[int, dict[str, Any]], list[str]]) -> list[str]:
    """A lane's list items: `item` for each event, and a gap where the numbers skip (a long lane
    is cut in the middle) or the lane had more events than listed."""
    out: list[str] = []
    last = 0
    events: list[dict[str, Any]] = lane.get("events") or []
    for x in events:
        n = number(x.get("n")) or 0
        if n > last + 1:
            out.append(f'<li class="gap">… {n - last - 1} more …</li>')
        last = n
        out += item(n, x)
    total = number(lane.get("events_total")) or last
    if total > last:
        out.append(f'<li class="gap">… {total - last} more …</li>')
    return out


def _chip(n: int, x: dict[str, Any], times: int, crashed: bool) -> str:
    point = str(x.get("point", ""))
    detail = ""
    if x.get("seq") is not None:
        detail = f" seq={x['seq']}"
    if x.get("call"):
        detail = f" {x['call']}" + (" RERUN" if x.get("rerun") else "")
    cls = f"k-{_family(point)}"
    extra = ""
    if times:
        cls += " dup"
        extra = f' <span class="dup-mark">⚠ effect {times}×</span>'
    if crashed:
        return (f'<li class="{cls} crash" title="SIGKILL here">{n:02d} {e(point)}{e(detail)} ✕ killed'
                f"{extra}</li>")
    return f'<li class="{cls}">{n:02d} {e(point)}{e(detail)}{extra}</li>'


def _request_chip(found: tuple[int, dict[str, Any]] | None, anchor: str) -> list[str]:
    if found is None:
        return []
    i, q = found
    return [f'<li class="req{" bad" if q.get("status") != 200 else ""}">'
            f'<a href="#{anchor}-r{i}">request #{e(q.get("index"))}: HTTP '
            f"{e(q.get('status'))}{fault_of(q)}</a></li>"]


def fault_of(q: dict[str, Any]) -> str:
    """A request's fault and error type, as `(fault 500, server_error)`, escaped."""
    parts = [f"fault {q['fault']}"] if q.get("fault") else []
    if q.get("error_type"):
        parts.append(str(q["error_type"]))
    return e(" (" + ", ".join(parts) + ")") if parts else ""


def _intruder_end(x: dict[str, Any]) -> str:
    if x.get("timed_out"):
        return "never ended (killed at its deadline)"
    if x.get("runaway") is not None:
        return f"killed at event {e(x['runaway'])}: over the step bound (a runaway)"
    return f"exit code {e(x.get('exit_code'))}"


def _intruder_lane(j: int, x: dict[str, Any], anchor: str, requests: Requests,
                   doubles: Doubles) -> list[str]:
    """The second process started while its holder was frozen: what it did and what it left."""
    holder, frozen = e(x.get("holder")), e(x.get("frozen_at"))

    def item(n: int, ev: dict[str, Any]) -> list[str]:
        return [_chip(n, ev, doubles.times(f"x{j}#{n}", ev), False),
                *_request_chip(requests.get((None, j, n)), anchor)]

    changed = [f"{what}: {', '.join(f'<code>{e(p)}</code>' for p in x.get(key) or [])}"
               for what, key in (("session files changed", "session_changed"),
                                 ("workspace files changed", "workspace_changed")) if x.get(key)]
    did = [f"requests: {', '.join(f'#{e(i)}' for i in x.get('requests') or [])}" if x.get("requests")
           else "", f"commits: {', '.join(f'seq {e(s)}' for s in x.get('commits') or [])}"
           if x.get("commits") else "", *changed]
    out = [f'<div class="lane intruder" id="{anchor}-x{j}" data-intruder="{j}"><p class="lane-head">'
           f"<b>second process</b> ({e(x.get('command', '?'))}; {_policies(x)}), started while "
           f"incarnation {holder} was frozen at event {frozen}: {_intruder_end(x)}</p>"
           '<ol class="events">', *_events(x, item), "</ol>"]
    out.append(f"<p>{'; '.join(d for d in did if d) or 'it changed nothing'}.</p>")
    if x.get("output"):
        out.append(f"<details><summary>its output (the end)</summary><pre>"
                   f"{e(clip(x['output'], MAX_OUTPUT))}</pre></details>")
    out.append("</div>")
    return out
