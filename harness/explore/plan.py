"""The abstract shape of a generated scenario: turns of tool actions, faults, an input or a cancel."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from crashmatrix.scenarios.model import CallIds, Policy, ProviderFault, ToolName

# Every appended line lands in a file that starts with this text, so exact file contents are known.
NOTES_HEADER = "# notes\n"
INPUT_TOKEN = "(extra request)"  # only the input's text holds it: the script's user_contains key


class ActionKind(StrEnum):
    """What one tool call of the plan does."""

    READ = "read"  # read a file; re-read until a result is ok
    APPEND = "append"  # append_note one line (never-replay)
    WRITE = "write"  # write a whole file (idempotent); re-issued after an unknown outcome
    BASH = "bash"  # a command with a witness file (never-replay); re-issued after an unknown outcome


class Care(StrEnum):
    """How the generated model reacts when told an append's outcome is unknown."""

    CHECK = "check"  # read the file; append again only if the line is missing
    BLIND = "blind"  # go on without checking: the line may be lost, never doubled


class InterruptKind(StrEnum):
    INPUT = "input"  # a user message asking for one more append
    CANCEL = "cancel"


@dataclass(frozen=True)
class Action:
    """One tool call of the plan; `slot` keeps its files apart from every other call's."""

    kind: ActionKind
    slot: int
    care: Care = Care.CHECK

    @property
    def tool(self) -> ToolName:
        return {ActionKind.READ: ToolName.READ, ActionKind.APPEND: ToolName.APPEND_NOTE,
                ActionKind.WRITE: ToolName.WRITE, ActionKind.BASH: ToolName.BASH}[self.kind]

    @property
    def path(self) -> str:
        """The file the call reads or changes (for bash: its witness file)."""
        return {ActionKind.READ: f"r{self.slot}.txt", ActionKind.APPEND: f"n{self.slot}.md",
                ActionKind.WRITE: f"w{self.slot}.txt",
                ActionKind.BASH: f".witness/b{self.slot}"}[self.kind]

    @property
    def text(self) -> str:
        """The line appended, the content written, the file read, or what bash prints last."""
        return {ActionKind.READ: f"content-{self.slot}", ActionKind.APPEND: f"note-{self.slot}",
                ActionKind.WRITE: f"written-{self.slot}",
                ActionKind.BASH: f"done-{self.slot}"}[self.kind]

    @property
    def args(self) -> dict[str, str]:
        if self.kind is ActionKind.READ:
            return {"path": self.path}
        if self.kind is ActionKind.APPEND:
            return {"path": self.path, "line": self.text}
        if self.kind is ActionKind.WRITE:
            return {"path": self.path, "content": self.text + "\n"}
        return {"command": f"mkdir -p .witness && echo ran >> {self.path}; echo {self.text}"}

    @property
    def guaranteed(self) -> bool:
        """Whether its effect surely completes in every crash schedule (so a boundary on it is
        surely reached): all but a blind append, whose lost line is never re-appended."""
        return not (self.kind is ActionKind.APPEND and self.care is Care.BLIND)

    def describe(self) -> str:
        if self.kind is ActionKind.APPEND:
            how = "checks after an unknown outcome" if self.care is Care.CHECK else "blind"
            return f"append_note {self.path} {self.text!r} ({how})"
        if self.kind is ActionKind.BASH:
            return f"bash (witness {self.path})"
        return f"{self.tool.value} {self.path}"


@dataclass(frozen=True)
class Interrupt:
    """An input or a cancel the harness delivers the first time the agent reaches `at`."""

    kind: InterruptKind
    at: str  # a probe boundary, `kind` or `kind:label`


@dataclass(frozen=True)
class FaultSpec:
    """A provider fault on the first request whose history holds `turn` assistant messages."""

    kind: ProviderFault
    turn: int


@dataclass(frozen=True)
class Plan:
    turns: tuple[tuple[Action, ...], ...]  # each turn is one assistant message's tool calls
    read_policy: Policy = Policy.SAFE
    read_restart_policy: Policy = Policy.SAFE
    write_policy: Policy = Policy.NEVER
    write_restart_policy: Policy = Policy.NEVER
    faults: tuple[FaultSpec, ...] = ()
    interrupt: Interrupt | None = None
    call_ids: CallIds = CallIds.HISTORY  # how the fake numbers calls (per-response: ids repeat)

    def actions(self) -> list[Action]:
        return [a for turn in self.turns for a in turn]

    def input_action(self) -> Action | None:
        """The append an input asks for: always a careful one, in a slot of its own."""
        if self.interrupt is None or self.interrupt.kind is not InterruptKind.INPUT:
            return None
        return Action(ActionKind.APPEND, len(self.actions()), Care.CHECK)

    def all_actions(self) -> list[Action]:
        extra = self.input_action()
        return self.actions() + ([extra] if extra else [])

    @property
    def cancelled_maybe(self) -> bool:
        return self.interrupt is not None and self.interrupt.kind is InterruptKind.CANCEL

    def tools(self) -> tuple[ToolName, ...]:
        used = {a.tool for a in self.all_actions()}
        if any(a.kind is ActionKind.APPEND and a.care is Care.CHECK for a in self.all_actions()):
            used.add(ToolName.READ)  # the check before a second append
        return tuple(t for t in ToolName if t in used)

    def policies(self) -> dict[ToolName, tuple[Policy, Policy]]:
        """The drawn policies of the tools in use: (at the first start, on every restart)."""
        drawn = {ToolName.READ: (self.read_policy, self.read_restart_policy),
                 ToolName.WRITE: (self.write_policy, self.write_restart_policy)}
        return {t: p for t, p in drawn.items() if t in self.tools()}

    def describe(self) -> list[str]:
        """Short lines for a person: the calls, per turn, and everything else that was drawn."""
        lines = []
        for k, turn in enumerate(self.turns, 1):
            shown = " + ".join(a.describe() for a in turn)
            lines.append(f"turn {k}{' (parallel)' if len(turn) > 1 else ''}: {shown}")
        policies = [f"{tool.value}={first.value}"
                    + (f" (restart: {restart.value})" if restart is not first else "")
                    for tool, (first, restart) in self.policies().items()]
        if policies:
            lines.append(f"policies: {', '.join(policies)}")
        for f in self.faults:
            lines.append(f"provider fault: {f.kind.value} on the first request after {f.turn} "
                         "assistant message(s)")
        extra = self.input_action()
        if extra is not None and self.interrupt is not None:
            lines.append(f"input asking for {extra.describe()}, delivered at {self.interrupt.at}")
        elif self.interrupt is not None:
            lines.append(f"cancel, delivered at {self.interrupt.at}")
        if self.call_ids is not CallIds.HISTORY:
            lines.append(f"call ids: {self.call_ids.value} (every reply numbers its calls from call_0)")
        return lines
