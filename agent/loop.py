"""The durable agent loop and the carrying-out of recovery plans (docs/architecture.md)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crashmatrix.agent import inbox
from crashmatrix.agent import records as R
from crashmatrix.agent.lock import SessionLock
from crashmatrix.agent.log import SessionLog, make_dir
from crashmatrix.agent.probe import ProbeKind, probe
from crashmatrix.agent.provider import ProviderClient, ProviderError
from crashmatrix.agent.records import Entry, Outcome, Recovered, Replay, Role
from crashmatrix.agent.recovery import Action, CallRepair, Plan, RecoveryBranch, parse_args, plan
from crashmatrix.agent.state import SessionState, fold
from crashmatrix.agent.tools import CallContext, Registry, ToolResult, invoke

SYSTEM_PROMPT = (
    "You are a careful coding agent. Use the tools to do the task. If a tool result says its "
    "outcome is unknown, check the current state before repeating a change."
)


@dataclass(frozen=True)
class AgentConfig:
    session_dir: Path
    workspace: Path
    fsync: bool = True
    retry_delay_s: float = 1.0
    max_retries: int = 3
    resume_budget: int = 3
    # Model replies per run, counted across the resumed runs of a chain. A provider that keeps
    # answering with tool calls (even invalid ones) would otherwise loop forever; 100 is far
    # above what a task of a coding agent needs and low enough to end a runaway in seconds.
    max_steps: int = 100
    system_prompt: str = SYSTEM_PROMPT


class Agent:
    """One incarnation of the agent on one session. Use as a context manager (it holds the lock)."""

    def __init__(
        self,
        config: AgentConfig,
        registry: Registry,
        provider: ProviderClient | None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self.registry = registry
        self.provider = provider
        self.sleep = sleep
        self.inbox_dir = config.session_dir / "inbox"
        self.lock = SessionLock(config.session_dir / "session.lock")
        self.log = SessionLog(config.session_dir / "session.jsonl", fsync=config.fsync)
        self.state = SessionState()
        self._opened_at = 1

    # -- session ---------------------------------------------------------------------------
    def __enter__(self) -> Agent:
        make_dir(self.config.session_dir, fsync=self.config.fsync)
        self.lock.acquire()
        try:
            self.log.open()
        except BaseException:
            self.lock.release()
            raise
        self.state = fold(self.log.entries())
        self._opened_at = self.log.next_seq
        return self

    def __exit__(self, *exc: object) -> None:
        self.log.close()
        self.lock.release()

    def commit(self, entries: list[Entry]) -> int:
        seq = self.log.commit(entries)
        # The same fold that reads the log on open, applied to just this commit: one source of
        # truth, and no re-reading of the whole session on every commit (that was quadratic).
        fold(entries, self.state)
        return seq

    def _ids(self, count: int) -> list[str]:
        seq = self.log.next_seq
        return [f"m{seq}.{i}" for i in range(count)]

    def notices_since_start(self) -> list[str]:
        """Notices this incarnation committed (budget exhaustion), for the CLI to show."""
        return [e["text"] for c in self.log.commits[self._opened_at - 1 :] for e in c.entries
                if e["type"] == R.EntryType.NOTICE]

    # -- entry points ----------------------------------------------------------------------
    def run_prompt(self, task: str) -> str:
        """Recover whatever is pending, then run TASK as a new run. Returns its outcome.

        Inputs waiting (in the inbox, or queued and not yet used) join TASK's run after the task,
        at its first poll: typically they were sent while the task was being given, and a crash
        kept the task from being saved. Started as a run of their own before it (as a recovery
        with no task does), the model would be asked about them without the task. An input left
        over from an earlier finished run joins too: with a task at hand, that is the run the
        user is talking to."""
        self.recover(start_queued=False)
        run_id = f"run-{self.log.next_seq}"
        (msg_id,) = self._ids(1)
        self.commit([
            R.run_started(run_id, R.Intent.PROMPT),
            R.message(msg_id, run_id, Role.USER, task),
        ])
        return self.drive(run_id)

    def recover(self, start_queued: bool = True) -> str | None:
        """Apply the recovery rules; drive a continuation to its end. Returns the last outcome.
        `start_queued`: with nothing to continue, inputs waiting start a run of their own."""
        if self.log.repair is not None:
            probe(ProbeKind.RECOVERY_BRANCH, RecoveryBranch.TORN_TAIL_REPAIRED.value,
                  line=self.log.repair.line)
        cancel = self._pending_cancel()
        decided = plan(
            self.state,
            {name: t.replay for name, t in self.registry.tools.items()},
            budget=self.config.resume_budget,
            pending_cancel=cancel.item_id if cancel else None,
        )
        for branch in decided.branches:
            probe(ProbeKind.RECOVERY_BRANCH, branch.value)
        if decided.action is Action.NOTHING:
            return self._start_from_queued_inputs() if start_queued else None
        outcome = self._apply(decided)
        if cancel is not None:
            inbox.remove(cancel)
        return outcome

    def _apply(self, p: Plan) -> str:
        assert p.run_id is not None
        repaired = [self._repair_message(p.run_id, r) for r in p.repairs]
        entries: list[Entry] = list(repaired)
        if p.action is Action.CONTINUE:
            new_run = f"run-{self.log.next_seq}"
            entries += [
                R.run_finished(p.run_id, Outcome.ABORTED, "interrupted"),
                R.run_started(new_run, R.Intent.RESUME, p.run_id, p.resume_attempt),
            ]
            self.commit(entries)
            return self.drive(new_run)
        if p.action is Action.CLOSE_STOPPED:
            entries.append(R.run_finished(p.run_id, Outcome.STOPPED, "a tool asked the run to stop"))
            self.commit(entries)
            return Outcome.STOPPED.value
        if p.action is Action.CLOSE_CANCELLED:
            finished = R.run_finished(p.run_id, Outcome.CANCELLED, "cancel requested")
            finished["cancel_id"] = p.cancel_id
            self.commit([*entries, finished])
            return Outcome.CANCELLED.value
        # Budget exhausted: say so visibly, and make no further request.
        budget = self.config.resume_budget
        text = (f"run {p.run_id} was interrupted again; the resume budget ({budget}) is used up, "
                "so it will not be resumed automatically")
        entries += [
            R.notice(p.run_id, text),
            R.run_finished(p.run_id, Outcome.ABORTED, f"resume budget {budget} exhausted"),
        ]
        self.commit(entries)
        return Outcome.ABORTED.value

    def _repair_message(self, run_id: str, repair: CallRepair) -> Entry:
        # Pending calls always belong to the open run: a recovery commit resolves every call
        # of the run it closes, so no older run can still owe a result.
        call = repair.call
        started = call.started
        msg_id = started["result_id"] if started else f"m{self.log.next_seq}.c-{call.call_id}"
        tool = self.registry.get(call.tool)
        if repair.rerun and tool is not None:
            # The result id the call reserved: unique in the session, where a call id is only
            # unique in its response, so a report can tell this rerun from another call's effect.
            probe(ProbeKind.EFFECT_BEFORE, call.tool, call_id=call.call_id, result_id=msg_id,
                  recovery=True)
            # The ids the first attempt had, from tool_started: a key derived from them repeats.
            # (Only a patched planner re-runs a call without one; it gets the ids it has.)
            call_id = started["call_id"] if started else call.call_id
            context = CallContext(msg_id, call_id, rerun=True)
            result = invoke(tool, self.config.workspace, repair.args, context=context)
            probe(ProbeKind.EFFECT_AFTER, call.tool, call_id=call.call_id, result_id=msg_id,
                  recovery=True)
            return R.message(msg_id, run_id, Role.TOOL, result.content, tool_call_id=call.call_id,
                             tool_name=call.tool, is_error=result.is_error,
                             recovered=Recovered.RERUN, terminate=result.terminate)
        return R.message(msg_id, run_id, Role.TOOL, R.UNKNOWN_OUTCOME_TEXT,
                         tool_call_id=call.call_id, tool_name=call.tool, is_error=True,
                         recovered=Recovered.UNKNOWN)

    # -- the loop --------------------------------------------------------------------------
    def drive(self, run_id: str) -> str:
        """Drive an open run until it finishes. Returns its outcome."""
        while True:
            if self._take_inbox(run_id):
                return Outcome.CANCELLED.value
            self._consume_queued(run_id)
            if self._at_step_limit(run_id):
                return self._finish_at_step_limit(run_id)
            try:
                reply = self._request()
            except ProviderError as exc:
                retry = self.state.last_retry
                attempt = (retry["attempt"] + 1) if retry else 1
                if exc.retryable and self._may_retry(attempt):
                    delay = self.config.retry_delay_s
                    self.commit([R.retry_pending(run_id, attempt, delay, exc.reason)])
                    self.sleep(delay)
                    continue
                self.commit([R.run_finished(run_id, Outcome.FAILED, f"provider: {exc.reason}")])
                return Outcome.FAILED.value
            calls = _normalise_calls(reply.get("tool_calls"))
            (msg_id,) = self._ids(1)
            assistant = R.message(msg_id, run_id, Role.ASSISTANT, reply.get("content"),
                                  tool_calls=calls)
            if not calls:
                self.commit([assistant, R.run_finished(run_id, Outcome.COMPLETED)])
                return self._start_from_queued_inputs() or Outcome.COMPLETED.value
            self.commit([assistant])
            if self._run_calls(run_id, msg_id, calls):
                return Outcome.STOPPED.value

    def _at_step_limit(self, run_id: str) -> bool:
        """The run's chain has had its max_steps model replies: the Nth reply is the last."""
        return self.state.chain_replies(run_id) >= self.config.max_steps

    def _may_retry(self, attempt: int) -> bool:
        """A retryable failure may be retried as `attempt` (1: the first retry of the step)."""
        return attempt <= self.config.max_retries

    def _finish_at_step_limit(self, run_id: str) -> str:
        """End a run that reached its step limit, saying so where the user looks (`show`)."""
        limit = self.config.max_steps
        text = (f"run {run_id} reached the step limit ({limit} model replies) and was ended "
                "without a further request")
        self.commit([R.notice(run_id, text),
                     R.run_finished(run_id, Outcome.FAILED, f"step limit {limit} reached")])
        return Outcome.FAILED.value

    def _request(self) -> dict[str, Any]:
        if self.provider is None:
            raise ProviderError("no provider configured", retryable=False)
        messages = [{"role": "system", "content": self.config.system_prompt}]
        messages += [to_wire(m) for m in self.state.messages]
        probe(ProbeKind.PROVIDER_BEFORE, "chat", messages=len(messages))
        try:
            reply = self.provider.complete(messages, self.registry.specs())
        except ProviderError as exc:
            probe(ProbeKind.PROVIDER_AFTER, "error", reason=exc.reason)
            raise
        probe(ProbeKind.PROVIDER_AFTER, "reply", tool_calls=len(reply.get("tool_calls") or []))
        return reply

    def _run_calls(self, run_id: str, assistant_id: str, calls: list[dict[str, Any]]) -> bool:
        """Run each call in order. Returns True when a tool asked the run to stop."""
        for index, call in enumerate(calls):
            call_id, name = call["id"], call["function"]["name"]
            args = parse_args(call["function"]["arguments"])
            tool = self.registry.get(name)
            (result_id,) = self._ids(1)
            if tool is None or args is None:
                why = f"unknown tool {name!r}" if tool is None else "arguments are not valid JSON"
                result = ToolResult(f"ERROR: {why}", is_error=True)
            else:
                self.commit([R.tool_started(run_id, assistant_id, call_id, name, args,
                                            result_id, tool.replay_of(args))])
                probe(ProbeKind.EFFECT_BEFORE, name, call_id=call_id, result_id=result_id)
                context = CallContext(result_id, call_id, rerun=False)
                result = invoke(tool, self.config.workspace, args, context=context)
                probe(ProbeKind.EFFECT_AFTER, name, call_id=call_id, result_id=result_id)
            self.commit([R.message(result_id, run_id, Role.TOOL, result.content,
                                   tool_call_id=call_id, tool_name=name,
                                   is_error=result.is_error, terminate=result.terminate)])
            if result.terminate:
                rest = calls[index + 1 :]
                ids = self._ids(len(rest) + 1)
                closing: list[Entry] = [
                    R.message(mid, run_id, Role.TOOL, R.SKIPPED_TEXT, tool_call_id=c["id"],
                              tool_name=c["function"]["name"], is_error=True)
                    for mid, c in zip(ids, rest, strict=False)
                ]
                closing.append(R.run_finished(run_id, Outcome.STOPPED, "a tool asked the run to stop"))
                self.commit(closing)
                return True
        return False

    # -- inbox -----------------------------------------------------------------------------
    def _pending_cancel(self) -> inbox.InboxItem | None:
        for item in inbox.poll(self.inbox_dir):
            if item.kind is inbox.InboxKind.CANCEL and item.item_id not in self.state.seen_cancels:
                return item
        return None

    def _take_inbox(self, run_id: str) -> bool:
        """Commit new inbox items. Returns True when a cancel closed the run."""
        items = inbox.poll(self.inbox_dir)
        probe(ProbeKind.INBOX_POLL, "inbox", items=len(items))
        fresh = [i for i in items if i.kind is inbox.InboxKind.INPUT
                 and i.item_id not in self.state.seen_inputs]
        if fresh:
            self.commit([R.input_queued(i.item_id, i.text) for i in fresh])
        for item in items:
            if item.kind is inbox.InboxKind.INPUT:
                inbox.remove(item)
        for item in items:
            if item.kind is inbox.InboxKind.CANCEL:
                if item.item_id not in self.state.seen_cancels:
                    finished = R.run_finished(run_id, Outcome.CANCELLED, "cancel requested")
                    finished["cancel_id"] = item.item_id
                    self.commit([finished])
                    inbox.remove(item)
                    return True
                inbox.remove(item)
        return False

    def _consume_queued(self, run_id: str) -> None:
        queued = list(self.state.queued_inputs.items())
        if not queued:
            return
        ids = self._ids(len(queued))
        entries: list[Entry] = []
        for msg_id, (input_id, text) in zip(ids, queued, strict=True):
            entries.append(R.message(msg_id, run_id, Role.USER, text))
            entries.append(R.input_consumed(input_id, msg_id))
        self.commit(entries)

    def _start_from_queued_inputs(self) -> str | None:
        """Inputs that arrived after the last request of a finished run start a new run."""
        items = [i for i in inbox.poll(self.inbox_dir)
                 if i.kind is inbox.InboxKind.INPUT and i.item_id not in self.state.seen_inputs]
        if items:
            self.commit([R.input_queued(i.item_id, i.text) for i in items])
            for i in items:
                inbox.remove(i)
        if not self.state.queued_inputs:
            return None
        run_id = f"run-{self.log.next_seq}"
        queued = list(self.state.queued_inputs.items())
        ids = self._ids(len(queued))
        entries: list[Entry] = [R.run_started(run_id, R.Intent.PROMPT)]
        for msg_id, (input_id, text) in zip(ids, queued, strict=True):
            entries.append(R.message(msg_id, run_id, Role.USER, text))
            entries.append(R.input_consumed(input_id, msg_id))
        self.commit(entries)
        return self.drive(run_id)


def to_wire(m: Entry) -> dict[str, Any]:
    """A committed message as the provider sees it."""
    role = m["role"]
    if role == Role.TOOL:
        return {"role": "tool", "tool_call_id": m["tool_call_id"], "content": m["content"] or ""}
    wire: dict[str, Any] = {"role": role, "content": m.get("content")}
    if m.get("tool_calls"):
        wire["tool_calls"] = m["tool_calls"]
    return wire


def _normalise_calls(raw: Any) -> list[dict[str, Any]]:
    """Keep the provider's calls in the exact wire shape, so the history replays verbatim."""
    calls: list[dict[str, Any]] = []
    for c in raw or []:
        fn = c.get("function") or {}
        arguments = fn.get("arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)
        calls.append({
            "id": str(c.get("id")),
            "type": "function",
            "function": {"name": str(fn.get("name", "")), "arguments": arguments},
        })
    return calls


def replay_policies(registry: Registry) -> dict[str, Replay]:
    return {name: t.replay for name, t in registry.tools.items()}
