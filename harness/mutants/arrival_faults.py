"""Inbox handling that holds for the arrival a scenario chose and breaks for another one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from crashmatrix.agent import inbox
from crashmatrix.agent.loop import Agent
from crashmatrix.harness.mutants.patching import Patcher

Take = Callable[[Agent, str], bool]


def inbox_clears_all(p: Patcher) -> None:
    take: Take = Agent._take_inbox

    def take_inbox(self: Agent, run_id: str) -> bool:
        closed = bool(take(self, run_id))
        # The fault: the inbox is emptied of inputs after each poll, not of the inputs the poll
        # read; one that lands in between is deleted unread.
        for item in inbox.poll(self.inbox_dir):
            if item.kind is inbox.InboxKind.INPUT:
                inbox.remove(item)
        return closed

    p.replace(Agent, "_take_inbox", take_inbox)


def cancel_after_first_reply(p: Patcher) -> None:
    take: Take = Agent._take_inbox
    poll: Callable[[Path], list[inbox.InboxItem]] = inbox.poll
    polled: set[str] = set()  # runs this process has polled the inbox for
    hiding = [False]

    def poll_without_cancels(path: Path) -> list[inbox.InboxItem]:
        items = poll(path)
        return [i for i in items if i.kind is not inbox.InboxKind.CANCEL] if hiding[0] else items

    def take_inbox(self: Agent, run_id: str) -> bool:
        # The fault: the first poll of each run this process drives takes inputs only; a cancel
        # already waiting is left for the next poll, after the model's first reply and its tools.
        hiding[0] = run_id not in polled
        polled.add(run_id)
        try:
            return bool(take(self, run_id))
        finally:
            hiding[0] = False

    p.replace(inbox, "poll", poll_without_cancels)
    p.replace(Agent, "_take_inbox", take_inbox)


def inputs_before_task(p: Patcher) -> None:
    recover: Callable[..., str | None] = Agent.recover

    def recover_starting_queued(self: Agent, start_queued: bool = True) -> str | None:
        # The fault: a start with inputs already waiting (they came while the task was being
        # given, and a crash came before the task was saved) runs them as a run of their own,
        # before the task: the model is asked about them without it.
        return recover(self, True)

    p.replace(Agent, "recover", recover_starting_queued)
