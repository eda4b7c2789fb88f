"""The adapter of our own durable agent (`crashmatrix.agent`), run as `python -m crashmatrix.agent`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

# The adapter for our own agent may read its store with the agent's own reader: the rules for
# what a valid log is live in one place. Other adapters read their agents' stores their own way.
from crashmatrix.agent import __version__, inbox
from crashmatrix.agent.log import LogCorrupt, read_commits
from crashmatrix.agent.records import commit_label
from crashmatrix.agent.recovery import DECLARED_BRANCHES
from crashmatrix.harness.adapters.interface import (
    Capability,
    LaunchSpec,
    PythonEntry,
    ToolSpec,
    python_program,
)
from crashmatrix.harness.adapters.tools import reference_tools
from crashmatrix.harness.records.profile import Profile
from crashmatrix.harness.records.transcript import Message, Record, Run, ToolStart, Transcript, calls_of

ENTRY = PythonEntry("crashmatrix.agent", "crashmatrix.agent.cli:main", ("crashmatrix.agent.cli",),
                    coverage_source="crashmatrix.agent")


class DurableAgentAdapter:
    """Our agent in `agent/`, run as `python -m crashmatrix.agent`."""

    name = "durable-agent"
    python: PythonEntry | None = ENTRY
    program = python_program("crashmatrix.agent")
    # kill, tear, inbox, store, concurrent: everything the harness asks
    capabilities = frozenset(Capability)

    def _common(self, spec: LaunchSpec, *, workspace: bool = True) -> list[str]:
        where = ["--workspace", str(spec.workspace)] if workspace else []
        argv = ["--session", str(spec.session), *where,
                "--provider-url", spec.provider_url,
                "--fsync", "on" if spec.fsync else "off",
                "--retry-delay", repr(spec.retry_delay_s),
                "--max-retries", str(spec.max_retries),
                "--resume-budget", str(spec.resume_budget),
                "--max-steps", str(spec.max_steps),
                "--provider-timeout", repr(spec.provider_timeout_s),
                "--tools", ",".join(spec.tools)]
        for tool, policy in sorted(spec.policies.items()):
            argv += ["--policy", f"{tool}={policy}"]
        return argv

    def start_args(self, spec: LaunchSpec, task: str) -> list[str]:
        return [*self._common(spec), "run", task]

    def recover_args(self, spec: LaunchSpec) -> list[str]:
        # `recover` is given no workspace: the session remembers it (config.json), as it does for
        # a user who types `recover` after `run`, so a session that lost its settings (a power
        # loss taking an unsynced config.json) recovers in the wrong place and the case fails.
        # The provider URL is still given: the harness's is per case (a secret in its path), and
        # a case started from another's recorded state holds that other case's.
        return [*self._common(spec, workspace=False), "recover"]

    def deliver(self, spec: LaunchSpec, kind: str, item_id: str, text: str) -> None:
        inbox.deliver(spec.session / "inbox", inbox.InboxKind(kind), text, item_id)

    def tear(self, spec: LaunchSpec) -> None:
        path = spec.session / "session.jsonl"
        data = path.read_bytes()
        start = data.rstrip(b"\n").rfind(b"\n") + 1
        last = len(data) - start
        if last > 1:
            # Keep half the last line, without its newline: a write cut short mid-line.
            with path.open("r+b") as f:
                f.truncate(start + last // 2)

    def env(self) -> dict[str, str]:
        # The agent is `crashmatrix.agent`, importable wherever crashmatrix is installed: nothing
        # extra is needed (and nothing of the user's sys.path can shadow it).
        return {}

    def profile(self) -> Profile:
        return Profile("crashmatrix reference agent", f"crashmatrix {__version__}",
                       "session.jsonl: an append-only log of runs, intents, results (fsync per "
                       "commit with --fsync on)",
                       "`recover` replays the log; each open call is repaired by its replay policy "
                       "(unknown outcomes are told to the model)")

    def declared_branches(self) -> tuple[str, ...]:
        return DECLARED_BRANCHES

    def declared_tools(self) -> tuple[ToolSpec, ...]:
        return reference_tools()

    def read_transcript(self, spec: LaunchSpec) -> Transcript:
        try:
            commits, torn = read_commits(spec.session / "session.jsonl")
        except LogCorrupt as exc:
            return Transcript(integrity_error=str(exc))
        transcript = transcript_of((c.seq, c.entries) for c in commits)
        if torn is not None:
            transcript.torn_tail = f"line {torn.line}: {torn.why}"
        return transcript


def transcript_of(commits: Iterable[tuple[int, Sequence[Mapping[str, object]]]]) -> Transcript:
    """The canonical transcript of our agent's commits, given as (seq, entries) in log order.

    Pure: `read_transcript` applies it to the session file, and tests to logs they build, so
    both read a store exactly the same way.
    """
    t = Transcript()
    runs: dict[str, Run] = {}
    count = 0
    for seq, entries in commits:
        count += 1
        t.labels[seq] = commit_label([dict(e) for e in entries])
        for e in entries:
            _read_entry(t, runs, seq, e)
    t.commits = count
    t.runs = list(runs.values())
    return t


def _read_entry(t: Transcript, runs: dict[str, Run], seq: int, e: Mapping[str, object]) -> None:
    kind = e.get("type")
    if kind == "run_started":
        run_id = str(e["run_id"])
        runs[run_id] = Run(run_id, seq, str(e["intent"]),
                           str(e["resumed_from"]) if e.get("resumed_from") else None,
                           int(str(e.get("resume_attempt") or 0)))
    elif kind == "run_finished":
        run_id = str(e["run_id"])
        old = runs.get(run_id)
        if old is None:
            t.integrity_error = f"commit {seq}: run_finished for unknown run {run_id}"
            return
        if old.outcome is not None:
            t.integrity_error = f"commit {seq}: run {run_id} finished twice"
        runs[run_id] = Run(old.run_id, old.seq, old.intent, old.resumed_from, old.resume_attempt,
                           str(e["outcome"]), str(e["reason"]) if e.get("reason") else None, seq)
    elif kind == "message":
        calls = calls_of(e.get("tool_calls"))
        content = e.get("content")
        t.messages.append(Message(
            seq=seq, msg_id=str(e["id"]), run_id=str(e["run_id"]), role=str(e["role"]),
            content=None if content is None else str(content), calls=calls,
            call_id=str(e["tool_call_id"]) if e.get("tool_call_id") else None,
            tool=str(e["tool_name"]) if e.get("tool_name") else None,
            is_error=bool(e.get("is_error")),
            recovered=str(e["recovered"]) if e.get("recovered") else None,
            terminate=bool(e.get("terminate")),
        ))
    elif kind == "tool_started":
        t.starts.append(ToolStart(seq, str(e["run_id"]), str(e["call_id"]), str(e["tool"]),
                                  e.get("args"), str(e["replay"]),
                                  str(e["result_id"]) if e.get("result_id") else None))
    elif isinstance(kind, str):
        t.records.append(Record(seq, kind, {k: v for k, v in e.items() if k != "type"}))


ADAPTER = DurableAgentAdapter()  # registered as `durable-agent` in pyproject.toml
