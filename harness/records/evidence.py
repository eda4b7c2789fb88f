"""A failing case's evidence for the reports: what `repro` shows, as deterministic, clipped JSON."""

from __future__ import annotations

import re
from typing import Any

from crashmatrix.harness.records.clip import clip, head_tail
from crashmatrix.harness.records.events import ProbeEvent
from crashmatrix.harness.records.observation import IncarnationRecord, Intrusion, Observation, Request
from crashmatrix.harness.records.redact import redact
from crashmatrix.harness.records.transcript import Message, Transcript

# Caps, so that one runaway case cannot make results.jsonl or the report huge. A list that is cut
# keeps its head and its tail and says how long it was (`*_total`).
MAX_TEXT = 4000  # characters of one message, reply, event detail or store entry
MAX_FILE = 16_000  # characters of one workspace file, before and after
MAX_OUTPUT = 2000  # characters of an intruder's output: its end, where a refusal says why
MAX_EVENTS_HEAD, MAX_EVENTS_TAIL = 100, 50  # per incarnation; the crash point is always kept
MAX_REQUESTS_HEAD, MAX_REQUESTS_TAIL = 20, 10
MAX_COMMITS_HEAD, MAX_COMMITS_TAIL = 150, 50
MAX_FILES = 50

# The name of a scratch tree (PREFIX-PID-RANDOM). Declared here, in the bottom layer, so that
# harness/execution/scratch.py, which makes and sweeps the trees, and the scrubbing below read
# one pattern.
SCRATCH_TREE_NAME = r"crashmatrix-(?:[a-z]+-)?(?P<pid>[1-9][0-9]*)-[a-z0-9_]{8}"
# A case's scratch tree with whatever directories lead to it: the pid and the random part differ
# from run to run, and the absolute path is the machine's, so it is replaced by a fixed word
# wherever it shows up (a tool's error message, an event detail).
_SCRATCH = re.compile(r"(?:/[^/\s'\"`]+)*/" + SCRATCH_TREE_NAME)
SCRATCH = "$SCRATCH"
# Durations in tool output (pytest's "1 passed in 0.03s") differ between two runs of one case;
# the record of a case must not, or `--jobs` and shards would change results.
_DURATION = re.compile(r"(?<![\w.])[0-9]+\.[0-9]+s\b")
DURATION = "N.NNs"
# The frozen holder's pid, as an intruder's refusal names it: differs from run to run too.
HOLDER_PID = "$HOLDER_PID"
# The probe events that mean a commit landed (the one-writer check counts the same).
WRITTEN = frozenset({"commit.written", "commit.after"})


def stable(text: str) -> str:
    """`text` without what differs between two runs of one case: scratch paths and durations."""
    return _DURATION.sub(DURATION, _SCRATCH.sub(SCRATCH, text))


def scrub(text: str) -> str:
    """`text` without scratch paths, durations and secrets (values of the harness's secret-looking
    variables: an agent may have found one anyway), clipped to MAX_TEXT."""
    return clip(redact(stable(text)), MAX_TEXT)


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


def _event(e: ProbeEvent) -> dict[str, Any]:
    out: dict[str, Any] = {"n": e.n, "point": scrub(e.point)}
    if e.kind.startswith("commit.") and e.detail.get("seq") is not None:
        out["seq"] = e.detail.get("seq")
    elif e.kind.startswith("effect."):
        if e.detail.get("call_id") is not None:
            out["call"] = scrub(str(e.detail.get("call_id")))
        # A call id is unique only within one model response; the result id the call reserved
        # is unique in the session, so two effects with one `result` are one call run twice.
        if e.detail.get("result_id") is not None:
            out["result"] = scrub(str(e.detail.get("result_id")))
        if e.detail.get("recovery"):
            out["rerun"] = True
    return out


def _events(inc: IncarnationRecord) -> list[dict[str, Any]]:
    # The crash point and the freeze point are what a reader looks for: never cut out.
    points = (inc.crashed_at, inc.frozen_at)
    kept = head_tail(len(inc.events), MAX_EVENTS_HEAD, MAX_EVENTS_TAIL,
                     [None if p is None else p - 1 for p in points])
    return [_event(inc.events[i]) for i in kept]


def _incarnation(inc: IncarnationRecord) -> dict[str, Any]:
    return {
        "index": inc.index,
        "command": inc.command,
        "settle": inc.settle,
        "policies": dict(sorted(inc.policies.items())),
        "events": _events(inc),
        "events_total": len(inc.events),
        "crashed_at": inc.crashed_at,
        "killed_at_call": inc.killed_at_call,
        # Only where a downstream step acted, so other evidence keeps its shape.
        **({"downstream_fault": inc.downstream_fault,
            "killed_at_request": inc.killed_at_request} if inc.downstream_fault else {}),
        "frozen_at": inc.frozen_at,
        "exit_code": inc.exit_code,
        "timed_out": inc.timed_out,
        "runaway": inc.runaway,
        **({"protocol_error": scrub(inc.protocol_error)} if inc.protocol_error else {}),
        "nondeterministic": None if inc.nondeterministic is None else scrub(inc.nondeterministic),
        "requests_before": inc.requests_before,
        "commits_before": inc.commits_before,
        **({"fault_notes": [scrub(n) for n in inc.fault_notes]} if inc.fault_notes else {}),
        **({"injected": inc.injected, "must_stop": inc.must_stop} if inc.injected else {}),
    }


def _owner(before: list[int], position: int) -> int:
    """The incarnation (1-based) whose span holds `position`, given where each span starts."""
    owner = 1
    for i, start in enumerate(before, 1):
        if start <= position:
            owner = i
    return owner


def _intruded(obs: Observation) -> dict[int, int]:
    """Request position -> the intrusion (1-based) that sent it: the intruder's requests sit in
    the provider's log among the holder's, and are no incarnation's."""
    return {p: j for j, x in enumerate(obs.intrusions, 1)
            for p in range(x.record.requests_before, x.requests_after)}


def _sent_at(obs: Observation, intruded: dict[int, int]) -> dict[int, tuple[int | None, int, int]]:
    """Request position -> (incarnation or None, intrusion or 0, the `provider.before` event that
    sent it): the k-th such event of a process sent the k-th request of its own positions."""
    total = len(obs.requests)
    at: dict[int, tuple[int | None, int, int]] = {}
    for k, inc in enumerate(obs.incarnations):
        end = obs.incarnations[k + 1].requests_before if k + 1 < len(obs.incarnations) else total
        own = [p for p in range(inc.requests_before, max(end, inc.requests_before)) if p not in intruded]
        sent = [e.n for e in inc.events if e.kind == "provider.before"]
        at.update({p: (inc.index, 0, n) for p, n in zip(own, sent, strict=False)})
    for j, x in enumerate(obs.intrusions, 1):
        sent = [e.n for e in x.record.events if e.kind == "provider.before"]
        at.update({p: (None, j, n) for p, n in
                   zip(range(x.record.requests_before, x.requests_after), sent, strict=False)})
    return at


def _requests(obs: Observation) -> list[dict[str, Any]]:
    starts = [inc.requests_before for inc in obs.incarnations]
    intruded = _intruded(obs)
    at = _sent_at(obs, intruded)
    out: list[dict[str, Any]] = []
    previous: tuple[int, list[Any]] | None = None
    for i in head_tail(len(obs.requests), MAX_REQUESTS_HEAD, MAX_REQUESTS_TAIL):
        r: Request = obs.requests[i]
        position = r.index if isinstance(r.index, int) else i
        messages: list[Any] = scrubbed(r.messages)
        sender = at.get(position)
        item: dict[str, Any] = {
            "index": r.index,
            "incarnation": (None if position in intruded else _owner(starts, position) if starts
                            else None),
            "event": None if sender is None else sender[2],
            "status": r.status,
            "fault": r.fault,
            "error_type": r.error_type,
            "rule": r.rule,
            "messages": messages,
            "reply": scrubbed(r.reply),
        }
        if position in intruded:
            item["intruder"] = intruded[position]
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
    """One store message in a line, as `repro` prints it (unclipped: the report clips)."""
    return scrub(m.line())


def _intruder_commits(x: Intrusion) -> list[int]:
    """The seqs an intruder's commits took, by its own probe events."""
    seqs = {e.detail.get("seq") for e in x.record.events if e.kind in WRITTEN}
    return sorted(s for s in seqs if isinstance(s, int) and not isinstance(s, bool))


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
    # A commit an intruder's probes say it wrote is the intruder's, not the holder's whose span
    # of seqs it falls in (two writers on one log may even reuse a seq: the first claim wins).
    intruded = {seq: j for j, x in reversed(list(enumerate(obs.intrusions, 1)))
                for seq in _intruder_commits(x)}
    seqs = sorted(set(entries) | set(t.labels) | set(range(1, t.commits + 1)))
    commits = []
    for seq in seqs:
        item: dict[str, Any] = {
            "seq": seq,
            "incarnation": (None if seq in intruded else _owner([s + 1 for s in starts], seq)
                            if starts else None),
            "label": scrub(t.labels[seq]) if seq in t.labels else None,
            "entries": entries.get(seq, [])}
        if seq in intruded:
            item["intruder"] = intruded[seq]
        commits.append(item)
    kept = head_tail(len(commits), MAX_COMMITS_HEAD, MAX_COMMITS_TAIL)
    return {
        "read": obs.store_read,
        "commits": [commits[i] for i in kept],
        "commits_total": len(commits),
        "runs": [{"run_id": r.run_id, "intent": r.intent, "outcome": r.outcome,
                  "reason": None if r.reason is None else scrub(r.reason)} for r in t.runs],
        "integrity_error": None if t.integrity_error is None else scrub(t.integrity_error),
        "torn_tail": None if t.torn_tail is None else scrub(t.torn_tail),
    }


def _changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))


def _file_text(text: str | None) -> tuple[str | None, int]:
    """A file's text as recorded, and how many characters were cut from its end. The cut is a
    number, not text: text would show up in a diff as a line the file never had."""
    if text is None:
        return None, 0
    kept = stable(text)
    return kept[:MAX_FILE], max(0, len(kept) - MAX_FILE)


def _files(obs: Observation) -> list[dict[str, Any]]:
    out = []
    for path in _changed(obs.workspace_before, obs.workspace_after)[:MAX_FILES]:
        item: dict[str, Any] = {"path": scrub(path)}
        cut: dict[str, int] = {}
        for side, text in (("before", obs.workspace_before.get(path)),
                           ("after", obs.workspace_after.get(path))):
            item[side], cut[side] = _file_text(text)
        if any(cut.values()):
            item["truncated"] = {side: n for side, n in cut.items() if n}
        out.append(item)
    return out


def _output(x: Intrusion) -> str:
    """What the intruder printed, its end, without what differs from run to run (the holder's
    pid, which a refusal names, included) and without secrets (records/redact.py)."""
    # Scratch paths first: the pid is part of their names too.
    text = stable(redact(x.output))
    if x.holder_pid:
        text = re.sub(rf"(?<!\d){x.holder_pid}(?!\d)", HOLDER_PID, text)
    return clip(text, MAX_OUTPUT, keep_end=True)


def _intrusion(obs: Observation, x: Intrusion) -> dict[str, Any]:
    r = x.record
    holder = next((i for i in obs.incarnations if i.index == x.holder), None)
    kept = head_tail(len(r.events), MAX_EVENTS_HEAD, MAX_EVENTS_TAIL)
    return {
        "holder": x.holder,
        "frozen_at": None if holder is None else holder.frozen_at,
        "command": r.command,
        "policies": dict(sorted(r.policies.items())),
        "events": [_event(r.events[i]) for i in kept],
        "events_total": len(r.events),
        "exit_code": r.exit_code,
        "timed_out": r.timed_out,
        "runaway": r.runaway,
        "output": _output(x),
        "requests": list(range(r.requests_before, x.requests_after)),
        "commits": _intruder_commits(x),
        "session_changed": [scrub(p) for p in _changed(x.session_before, x.session_after)],
        "workspace_changed": [scrub(p) for p in _changed(x.workspace_before, x.workspace_after)],
    }


def evidence(obs: Observation) -> dict[str, Any]:
    """Per incarnation its events and end; the second processes started beside a frozen one; the
    provider requests with the history each sent; deliveries; the store's commits by the process
    that wrote them; the files that changed."""
    return {
        "incarnations": [_incarnation(inc) for inc in obs.incarnations],
        "intrusions": [_intrusion(obs, x) for x in obs.intrusions],
        "requests": _requests(obs),
        "requests_total": len(obs.requests),
        "deliveries": [{"kind": d.kind, "item_id": scrub(d.item_id), "text": scrub(d.text),
                        "incarnation": d.incarnation, "event": d.event_n} for d in obs.deliveries],
        "store": _store(obs),
        "files": _files(obs),
        "files_total": len(_changed(obs.workspace_before, obs.workspace_after)),
        # Only for a scenario with downstream services, so other evidence keeps its shape.
        **({"downstream": [{"seq": d.seq, "incarnation": d.incarnation, "service": d.service,
                            "method": d.method, "path": scrub(d.path), "key": scrub(d.key or ""),
                            "outcome": d.outcome, "status": d.status, "op": d.op,
                            "kind": d.kind, "fault": d.fault}
                           for d in obs.downstream]} if obs.downstream else {}),
    }
