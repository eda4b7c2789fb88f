"""Faulty loop steps: what a running agent keeps only in memory, and what it sends on resume."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from weakref import WeakKeyDictionary

from crashmatrix.agent import inbox
from crashmatrix.agent import records as R
from crashmatrix.agent.loop import Agent
from crashmatrix.agent.records import Entry, EntryType, Intent, Role
from crashmatrix.agent.state import SessionState
from crashmatrix.harness.mutants.patching import Patcher

Commit = Callable[[Agent, list[Entry]], int]
Step = Callable[[Agent, str], Any]
BARE_CONTINUE = "continue"


def volatile_inbox(p: Patcher) -> None:
    held: WeakKeyDictionary[Agent, dict[str, str]] = WeakKeyDictionary()
    take: Step = Agent._take_inbox
    consume: Step = Agent._consume_queued

    def take_inbox(self: Agent, run_id: str) -> bool:
        memory = held.setdefault(self, {})
        for item in inbox.poll(self.inbox_dir):
            if item.kind is inbox.InboxKind.INPUT and item.item_id not in self.state.seen_inputs:
                # The fault: the input leaves the durable queue before anything durable holds it.
                memory[item.item_id] = item.text
                inbox.remove(item)
        return bool(take(self, run_id))

    def consume_queued(self: Agent, run_id: str) -> None:
        consume(self, run_id)
        memory = held.pop(self, {})
        if not memory:
            return
        # Recorded only once it is used, in the same shape the correct agent writes.
        entries: list[Entry] = []
        for msg_id, (input_id, text) in zip(self._ids(len(memory)), memory.items(), strict=True):
            entries += [R.input_queued(input_id, text), R.message(msg_id, run_id, Role.USER, text),
                        R.input_consumed(input_id, msg_id)]
        self.commit(entries)

    p.replace(Agent, "_take_inbox", take_inbox)
    p.replace(Agent, "_consume_queued", consume_queued)


def volatile_stop(p: Patcher) -> None:
    message: Callable[..., Entry] = R.message

    def message_without_stop(msg_id: str, run_id: str, role: Role, content: str | None,
                             **fields: Any) -> Entry:
        # The fault: the result is saved without `terminate`; the loop still knows, in memory,
        # that the run must stop, and closes it in a later commit.
        fields.pop("terminate", None)
        return message(msg_id, run_id, role, content, **fields)

    p.replace(R, "message", message_without_stop)


def _task(s: SessionState) -> str:
    """The user message that opened the latest prompt run."""
    prompts = [r.run_id for r in s.runs.values() if r.intent == Intent.PROMPT]
    for m in s.messages:
        if prompts and m["run_id"] == prompts[-1] and m["role"] == Role.USER:
            return str(m["content"])
    return ""


def _message_on_resume(p: Patcher, text: Callable[[SessionState], str]) -> None:
    commit: Commit = Agent.commit

    def commit_with_nudge(self: Agent, entries: list[Entry]) -> int:
        resumed = next((e for e in entries if e["type"] == EntryType.RUN_STARTED
                        and e["intent"] == Intent.RESUME), None)
        if resumed is not None:
            nudge = R.message(f"m{self.log.next_seq}.resume", resumed["run_id"], Role.USER,
                              text(self.state))
            entries = [*entries, nudge]
        return commit(self, entries)

    p.replace(Agent, "commit", commit_with_nudge)


def resend_task(p: Patcher) -> None:
    # The fault: a resume starts the continuation with the original task, as a new request would.
    _message_on_resume(p, _task)


def bare_continue(p: Patcher) -> None:
    # The fault: a resume nudges the model with a user message the user never wrote.
    _message_on_resume(p, lambda s: BARE_CONTINUE)


def late_intent(p: Patcher) -> None:
    held: WeakKeyDictionary[Agent, list[Entry]] = WeakKeyDictionary()
    commit: Commit = Agent.commit

    def commit_intent_late(self: Agent, entries: list[Entry]) -> int:
        if entries and all(e["type"] == EntryType.TOOL_STARTED for e in entries):
            # The fault: the intent is kept in memory while the tool runs, and written only with
            # the result, just before it: a crash in between leaves an effect with no intent.
            held[self] = entries
            return self.log.next_seq
        late = held.pop(self, None)
        if late is not None:
            commit(self, late)
        return commit(self, entries)

    p.replace(Agent, "commit", commit_intent_late)
