"""A failing case's evidence for the reports: what `repro` shows, as deterministic, clipped JSON."""

from __future__ import annotations

import re
from typing import Any

from crashmatrix.harness.records.events import ProbeEvent
from crashmatrix.harness.records.observation import IncarnationRecord, Observation, Request
from crashmatrix.harness.records.transcript import Message, Transcript

# Caps, so that one runaway case cannot make results.jsonl or the report huge. A list that is cut
# keeps its head and its tail and says how long it was (`*_total`).
MAX_TEXT = 4000  # characters of one message, reply, event detail or store entry
MAX_FILE = 16_000  # characters of one workspace file, before and after
MAX_EVENTS_HEAD, MAX_EVENTS_TAIL = 100, 50  # per incarnation; the crash point is always kept
MAX_REQUESTS_HEAD, MAX_REQUESTS_TAIL = 20, 10
MAX_COMMITS_HEAD, MAX_COMMITS_TAIL = 150, 50
MAX_FILES = 50

# A case's scratch tree, as harness/execution/scratch.py names it (PREFIX-PID-RANDOM), with
# whatever directories lead to it: the pid and the random part differ from run to run, and the
# absolute path is the machine's, so it is replaced by a fixed word wherever it shows up (a tool's
# error message, an event detail). Records may not import execution, hence the pattern twice.
_SCRATCH = re.compile(r"(?:/[^/\s'\"`]+)*/crashmatrix-(?:[a-z]+-)?[1-9][0-9]*-[a-z0-9_]{8}")
SCRATCH = "$SCRATCH"
# Durations in tool output (pytest's "1 passed in 0.03s") differ between two runs of one case;
# the record of a case must not, or `--jobs` and shards would change results.
_DURATION = re.compile(r"(?<![\w.])[0-9]+\.[0-9]+s\b")
DURATION = "N.NNs"


def scrub(text: str) -> str:
    """`text` without scratch paths and durations, clipped to MAX_TEXT."""
    return clip(_DURATION.sub(DURATION, _SCRATCH.sub(SCRATCH, text)))


def clip(text: str, limit: int = MAX_TEXT) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"… [{len(text) - limit} more characters]"


def scrubbed(value: Any) -> Any:
    """A JSON value with every string scrubbed (keys are the protocol's and kept)."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {str(k): scrubbed(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [scrubbed(v) for v in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return scrub(str(value))


def _head_tail(count: int, head: int, tail: int, keep: int | None = None) -> list[int]:
    """Indexes (0-based) a capped list keeps: all of a short one, else its head, its tail and `keep`."""
    if count <= head + tail:
        return list(range(count))
    chosen = set(range(head)) | set(range(count - tail, count))
    if keep is not None and 0 <= keep < count:
        chosen.add(keep)
    return sorted(chosen)


def _event(e: ProbeEvent) -> dict[str, Any]:
    out: dict[str, Any] = {"n": e.n, "point": scrub(e.point)}
    if e.kind.startswith("commit.") and e.detail.get("seq") is not None:
        out["seq"] = e.detail.get("seq")
    elif e.kind.startswith("effect."):
        if e.detail.get("call_id") is not None:
            out["call"] = scrub(str(e.detail.get("call_id")))
        if e.detail.get("recovery"):
            out["rerun"] = True
    return out


def _incarnation(inc: IncarnationRecord) -> dict[str, Any]:
    kept = _head_tail(len(inc.events), MAX_EVENTS_HEAD, MAX_EVENTS_TAIL,
                      None if inc.crashed_at is None else inc.crashed_at - 1)
    return {
        "index": inc.index,
        "command": inc.command,
        "settle": inc.settle,
        "policies": dict(sorted(inc.policies.items())),
        "events": [_event(inc.events[i]) for i in kept],
        "events_total": len(inc.events),
        "crashed_at": inc.crashed_at,
        "exit_code": inc.exit_code,
        "timed_out": inc.timed_out,
        "runaway": inc.runaway,
        "nondeterministic": None if inc.nondeterministic is None else scrub(inc.nondeterministic),
        "requests_before": inc.requests_before,
        "commits_before": inc.commits_before,
    }


def _owner(before: list[int], position: int) -> int:
    """The incarnation (1-based) whose span holds `position`, given where each span starts."""
    owner = 1
    for i, start in enumerate(before, 1):
        if start <= position:
            owner = i
    return owner


def _requests(obs: Observation) -> list[dict[str, Any]]:
    starts = [inc.requests_before for inc in obs.incarnations]
    # The k-th `provider.before` of an incarnation sent its k-th request: that event is where the
    # request sits on the incarnation's lane.
    at: dict[int, int] = {}
    for inc in obs.incarnations:
        sent = [e.n for e in inc.events if e.kind == "provider.before"]
        for k, n in enumerate(sent):
            at[inc.requests_before + k] = n
    out: list[dict[str, Any]] = []
    previous: tuple[int, list[Any]] | None = None
    for i in _head_tail(len(obs.requests), MAX_REQUESTS_HEAD, MAX_REQUESTS_TAIL):
        r: Request = obs.requests[i]
        position = r.index if isinstance(r.index, int) else i
        messages: list[Any] = scrubbed(r.messages)
        item: dict[str, Any] = {
            "index": r.index,
            "incarnation": _owner(starts, position) if starts else None,
            "event": at.get(position),
            "status": r.status,
            "fault": r.fault,
            "error_type": r.error_type,
            "rule": r.rule,
            "messages": messages,
            "reply": scrubbed(r.reply),
        }
        # Each request re-sends the history before it: stored whole, a case's requests grow with
        # the square of its length. The part a request shares with the one before is named instead
        # (`shares`); `history` puts the whole back together.
        if previous is not None:
            shared = _common_prefix(previous[1], messages)
            if shared:
                item["shares"] = {"request": previous[0], "messages": shared}
                item["messages"] = messages[shared:]
        previous = (r.index, messages)
        out.append(item)
    return out


def _common_prefix(a: list[Any], b: list[Any]) -> int:
    n = 0
    while n < len(a) and n < len(b) and a[n] == b[n]:
        n += 1
    return n


def history(requests: list[dict[str, Any]], position: int) -> list[Any]:
    """The whole message history the request at `position` (in evidence["requests"]) sent."""
    item = requests[position]
    shares = item.get("shares")
    if not shares or position == 0:
        return list(item.get("messages") or [])
    return history(requests, position - 1)[: int(shares["messages"])] + list(item.get("messages") or [])


def _entry(m: Message) -> str:
    """One store message in a line, as `repro` prints it."""
    mark = f" [{m.recovered}]" if m.recovered else ""
    if m.calls:
        body = "; ".join(f"{c.call_id} {c.tool}({c.raw_args})" for c in m.calls)
    elif m.role == "tool":
        body = f"{m.call_id}: {m.content or ''}"
    else:
        body = m.content or ""
    error = " (error)" if m.is_error else ""
    return scrub(f"{m.role}{mark}{error}: {body}")


def _store(obs: Observation) -> dict[str, Any]:
    t: Transcript = obs.transcript
    entries: dict[int, list[str]] = {}
    for run in t.runs:
        entries.setdefault(run.seq, []).append(f"run {run.run_id} started ({run.intent})")
        if run.finished_seq is not None:
            entries.setdefault(run.finished_seq, []).append(
                f"run {run.run_id} finished: {run.outcome}" + (f" ({run.reason})" if run.reason else ""))
    for s in t.starts:
        entries.setdefault(s.seq, []).append(scrub(f"tool_started {s.call_id} {s.tool} ({s.replay})"))
    for m in t.messages:
        entries.setdefault(m.seq, []).append(_entry(m))
    for rec in t.records:
        entries.setdefault(rec.seq, []).append(scrub(f"{rec.kind} {scrubbed(rec.data)}"))
    starts = [inc.commits_before for inc in obs.incarnations]
    seqs = sorted(set(entries) | set(t.labels) | set(range(1, t.commits + 1)))
    commits = [{"seq": seq, "incarnation": _owner([s + 1 for s in starts], seq) if starts else None,
                "label": scrub(t.labels[seq]) if seq in t.labels else None,
                "entries": entries.get(seq, [])}
               for seq in seqs]
    kept = _head_tail(len(commits), MAX_COMMITS_HEAD, MAX_COMMITS_TAIL)
    return {
        "read": obs.store_read,
        "commits": [commits[i] for i in kept],
        "commits_total": len(commits),
        "runs": [{"run_id": r.run_id, "intent": r.intent, "outcome": r.outcome,
                  "reason": None if r.reason is None else scrub(r.reason)} for r in t.runs],
        "integrity_error": None if t.integrity_error is None else scrub(t.integrity_error),
        "torn_tail": None if t.torn_tail is None else scrub(t.torn_tail),
    }


def _files(obs: Observation) -> list[dict[str, Any]]:
    paths = sorted(p for p in set(obs.workspace_before) | set(obs.workspace_after)
                   if obs.workspace_before.get(p) != obs.workspace_after.get(p))
    out = []
    for path in paths[:MAX_FILES]:
        before, after = obs.workspace_before.get(path), obs.workspace_after.get(path)
        out.append({"path": scrub(path),
                    "before": None if before is None else clip(_SCRATCH.sub(SCRATCH, before), MAX_FILE),
                    "after": None if after is None else clip(_SCRATCH.sub(SCRATCH, after), MAX_FILE)})
    return out


def evidence(obs: Observation) -> dict[str, Any]:
    """Per incarnation its events and end; the provider requests with the history each sent;
    deliveries; the store's commits by the incarnation that wrote them; the files that changed."""
    return {
        "incarnations": [_incarnation(inc) for inc in obs.incarnations],
        "requests": _requests(obs),
        "requests_total": len(obs.requests),
        "deliveries": [{"kind": d.kind, "item_id": scrub(d.item_id), "text": scrub(d.text),
                        "incarnation": d.incarnation, "event": d.event_n} for d in obs.deliveries],
        "store": _store(obs),
        "files": _files(obs),
        "files_total": len([p for p in set(obs.workspace_before) | set(obs.workspace_after)
                            if obs.workspace_before.get(p) != obs.workspace_after.get(p)]),
    }
