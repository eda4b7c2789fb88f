"""Builds verifier observations by replaying, step by step, what agent/loop.py commits and reports.

Each builder step emits the same probe events, commits the same entries (built with the agent's
own record constructors) and records the same provider requests as the real agent at that point,
so a test can crash, recover and misbehave exactly where it wants, without processes or files.
"""

from __future__ import annotations

import json
from typing import Any

from crashmatrix.agent import records as R
from crashmatrix.agent.loop import SYSTEM_PROMPT, to_wire
from crashmatrix.agent.records import Entry, Intent, Outcome, Recovered, Replay, Role
from crashmatrix.agent.recovery import RecoveryBranch
from crashmatrix.agent.state import fold

# One place defines how a store becomes a transcript: tests read their logs exactly as the
# harness reads real ones.
from crashmatrix.harness.adapters.durable import transcript_of
from crashmatrix.harness.records.case import Case, CrashStep
from crashmatrix.harness.records.events import ProbeEvent
from crashmatrix.harness.records.observation import Delivery, IncarnationRecord, Observation, Request
from crashmatrix.harness.records.transcript import Transcript
from crashmatrix.harness.verify import InvariantId, Violation, verify
from crashmatrix.scenarios.model import (
    AgentSettings,
    Boundary,
    BoundaryKind,
    Expect,
    LineRule,
    ProviderSettings,
    Scenario,
    ToolName,
    Tools,
)
from crashmatrix.scenarios.model import (
    Outcome as ExpectOutcome,
)

K = BoundaryKind
B = RecoveryBranch

TASK = "append '修复登录超时' to CHANGELOG.md, run `pytest -q`, report the result"
LINE = "修复登录超时"
CHANGELOG = "CHANGELOG.md"
WITNESS = ".witness/pytest"
# Stands in for `pytest -q`: a real shell runs it identically (the builder's fidelity test does),
# and each real run leaves one line in the witness file.
PYTEST = f"mkdir -p .witness && echo ran >> {WITNESS} && echo '1 passed in 0.01s'"
START = {CHANGELOG: "# Changelog\n"}
ANSWER = "Added the line to CHANGELOG.md. pytest -q: 1 passed"
POLICIES = {"read": "safe", "append_note": "never", "bash": "never"}
Call = dict[str, Any]


def call(call_id: str, tool: str, **args: str) -> Call:
    """A tool call in the exact wire shape the agent stores (`_normalise_calls`)."""
    return {"id": call_id, "type": "function",
            "function": {"name": tool, "arguments": json.dumps(args, ensure_ascii=False)}}


APPEND = call("call_1", "append_note", path=CHANGELOG, line=LINE)
READ = call("call_2", "read", path=CHANGELOG)
BASH = call("call_3", "bash", command=PYTEST)


def _name(c: Call) -> str:
    return str(c["function"]["name"])


def _args(c: Call) -> dict[str, Any]:
    args: dict[str, Any] = json.loads(c["function"]["arguments"])
    return args


def read_transcript(commits: list[list[Entry]]) -> Transcript:
    """What DurableAgentAdapter.read_transcript returns for a store holding these commits."""
    return transcript_of(enumerate(commits, start=1))


class ObservationBuilder:
    """One case, built in the order the agent acts. Steps act on the current incarnation."""

    def __init__(self, workspace: dict[str, str] | None = None, *, scenario: str = "changelog",
                 resume_budget: int = 3) -> None:
        self.scenario = scenario
        self.before = dict(START if workspace is None else workspace)
        self.workspace = dict(self.before)
        self.commits: list[list[Entry]] = []
        self.incarnations: list[IncarnationRecord] = []
        self.requests: list[Request] = []
        self.deliveries: list[Delivery] = []
        self.resume_budget = resume_budget
        # call id -> the result id its tool_started reserved: the agent reports it with each
        # effect (a rerun's too), and so does the builder.
        self.reserved: dict[str, str] = {}

    # -- incarnations ----------------------------------------------------------------------
    @property
    def inc(self) -> IncarnationRecord:
        return self.incarnations[-1]

    @property
    def next_seq(self) -> int:
        return len(self.commits) + 1

    def incarnation(self, command: str = "recover", policies: dict[str, str] | None = None) -> None:
        self.incarnations.append(IncarnationRecord(
            len(self.incarnations) + 1, command, dict(POLICIES if policies is None else policies),
            requests_before=len(self.requests), commits_before=len(self.commits)))

    def event(self, kind: BoundaryKind, label: str, **detail: Any) -> ProbeEvent:
        e = ProbeEvent(len(self.inc.events) + 1, kind.value, label, detail)
        self.inc.events.append(e)
        return e

    def kill(self) -> None:
        """The harness kills the current incarnation at its latest event."""
        self.inc.crashed_at = self.inc.events[-1].n

    def exit(self, code: int = 0) -> None:
        self.inc.exit_code = code

    def settle(self) -> None:
        """The runner's extra `recover` on a finished session: it must find nothing to do."""
        self.incarnation()
        self.inc.settle = True
        self.branch(B.NO_OPEN_RUN)
        self.exit(0)

    def deliver(self, kind: str, item_id: str, text: str = "") -> None:
        """The harness drops an inbox item while the agent waits at its latest event."""
        self.deliveries.append(Delivery(kind, item_id, text, self.inc.index, self.inc.events[-1].n))

    # -- commits ---------------------------------------------------------------------------
    def commit(self, entries: list[Entry], upto: BoundaryKind = K.COMMIT_AFTER) -> int:
        """agent/log.py's commit: before, write, written, fsync, after; `upto` stops early."""
        seq, label = self.next_seq, R.commit_label(entries)
        self.event(K.COMMIT_BEFORE, label, seq=seq)
        if upto is K.COMMIT_BEFORE:
            return seq
        self.commits.append(entries)
        self.event(K.COMMIT_WRITTEN, label, seq=seq)
        if upto is not K.COMMIT_WRITTEN:
            self.event(K.COMMIT_AFTER, label, seq=seq)
        return seq

    def msg_id(self) -> str:
        return f"m{self.next_seq}.0"

    # -- the loop (agent/loop.py order) ----------------------------------------------------
    def start(self, task: str = TASK) -> str:
        """`run TASK`: recovery finds nothing, then run_started + the task in one commit."""
        self.incarnation("run")
        self.branch(B.NO_OPEN_RUN)
        run_id, msg_id = f"run-{self.next_seq}", self.msg_id()
        self.commit([R.run_started(run_id, Intent.PROMPT), R.message(msg_id, run_id, Role.USER, task)])
        return run_id

    def poll(self, items: int = 0) -> None:
        self.event(K.INBOX_POLL, "inbox", items=items)

    def wire(self) -> list[dict[str, Any]]:
        """The messages the agent sends now: the system prompt, then its committed history."""
        messages = [{"role": "system", "content": SYSTEM_PROMPT}]
        return messages + [to_wire(m) for m in fold(e for c in self.commits for e in c).messages]

    def request(self, status: int = 200, fault: str | None = None, tool_calls: int = 0,
                messages: list[dict[str, Any]] | None = None,
                reply: dict[str, Any] | None = None) -> None:
        sent = self.wire() if messages is None else messages
        self.event(K.PROVIDER_BEFORE, "chat", messages=len(sent))
        self.requests.append(Request(len(self.requests), sent, status, fault, reply=reply))
        if status == 200:
            self.event(K.PROVIDER_AFTER, "reply", tool_calls=tool_calls)
        else:
            self.event(K.PROVIDER_AFTER, "error", reason=fault or f"HTTP {status}")

    def ask(self, run_id: str, *calls: Call, text: str | None = None) -> str:
        """Poll, request, settle the assistant; a reply without calls also finishes the run."""
        self.poll()
        return self.reply(run_id, *calls, text=text)

    def reply(self, run_id: str, *calls: Call, text: str | None = None) -> str:
        """`ask` after its inbox poll (a test may deliver something at the poll in between)."""
        self.request(tool_calls=len(calls), reply={"role": "assistant", "content": text,
                                                   "tool_calls": list(calls) or None})
        msg_id = self.msg_id()
        assistant = R.message(msg_id, run_id, Role.ASSISTANT, text, tool_calls=list(calls) or None)
        if calls:
            self.commit([assistant])
        else:
            self.commit([assistant, R.run_finished(run_id, Outcome.COMPLETED)])
        return msg_id

    def started(self, run_id: str, assistant_id: str, c: Call, replay: str | None = None,
                upto: BoundaryKind = K.COMMIT_AFTER) -> str:
        result_id = self.msg_id()
        self.reserved[c["id"]] = result_id
        policy = Replay(replay or self.inc.policies.get(_name(c), "never"))
        self.commit([R.tool_started(run_id, assistant_id, c["id"], _name(c), _args(c), result_id,
                                    policy)], upto)
        return result_id

    def effect(self, c: Call, *, recovery: bool = False,
               upto: BoundaryKind = K.EFFECT_AFTER) -> tuple[str, bool]:
        """The tool runs on the workspace between its effect.before and effect.after."""
        extra: dict[str, Any] = {"result_id": self.reserved[c["id"]]} if c["id"] in self.reserved else {}
        if recovery:
            extra["recovery"] = True
        self.event(K.EFFECT_BEFORE, _name(c), call_id=c["id"], **extra)
        if upto is K.EFFECT_BEFORE:
            return "", False  # killed at effect.before: the tool never ran
        outcome = self.simulate(c)
        self.event(K.EFFECT_AFTER, _name(c), call_id=c["id"], **extra)
        return outcome

    def result(self, run_id: str, result_id: str, c: Call, content: str, *, is_error: bool = False,
               recovered: Recovered | None = None) -> int:
        return self.commit([self.result_entry(run_id, result_id, c, content, is_error=is_error,
                                              recovered=recovered)])

    def result_entry(self, run_id: str, result_id: str, c: Call, content: str, *,
                     is_error: bool = False, recovered: Recovered | None = None) -> Entry:
        return R.message(result_id, run_id, Role.TOOL, content, tool_call_id=c["id"],
                         tool_name=_name(c), is_error=is_error, recovered=recovered)

    def call(self, run_id: str, assistant_id: str, c: Call) -> None:
        result_id = self.started(run_id, assistant_id, c)
        content, is_error = self.effect(c)
        self.result(run_id, result_id, c, content, is_error=is_error)

    def turn(self, run_id: str, *calls: Call) -> str:
        assistant_id = self.ask(run_id, *calls)
        for c in calls:
            self.call(run_id, assistant_id, c)
        return assistant_id

    def retry(self, run_id: str, attempt: int = 1, status: int = 500, fault: str = "http_500") -> None:
        """A retryable provider failure: retry_pending is committed before waiting."""
        self.poll()
        self.request(status, fault)
        self.commit([R.retry_pending(run_id, attempt, 0.0, f"HTTP {status}")])

    def take_input(self, *items: tuple[str, str]) -> int:
        """A poll found new inputs: each is committed as input_queued before it counts."""
        return self.commit([R.input_queued(item_id, text) for item_id, text in items])

    def consume(self, run_id: str, *items: tuple[str, str]) -> int:
        """Queued inputs become user messages, with input_consumed, in one commit."""
        entries: list[Entry] = []
        for k, (item_id, text) in enumerate(items):
            msg_id = f"m{self.next_seq}.{k}"
            entries += [R.message(msg_id, run_id, Role.USER, text), R.input_consumed(item_id, msg_id)]
        return self.commit(entries)

    # -- recovery (agent/loop.py `recover` and `_apply`) -----------------------------------
    def branch(self, branch: RecoveryBranch | str) -> None:
        self.event(K.RECOVERY_BRANCH, str(branch))

    def unknown(self, run_id: str, result_id: str, c: Call) -> Entry:
        return self.result_entry(run_id, result_id, c, R.UNKNOWN_OUTCOME_TEXT, is_error=True,
                                 recovered=Recovered.UNKNOWN)

    def resume(self, run_id: str, repairs: list[Entry], attempt: int) -> str:
        """Repairs, the interrupted run's close and the continuation's start: one commit."""
        new = f"run-{self.next_seq}"
        self.commit([*repairs, R.run_finished(run_id, Outcome.ABORTED, "interrupted"),
                     R.run_started(new, Intent.RESUME, run_id, attempt)])
        return new

    # -- tools, simulated on the workspace snapshot ----------------------------------------
    def simulate(self, c: Call) -> tuple[str, bool]:
        name, args = _name(c), _args(c)
        if name == ToolName.APPEND_NOTE:
            path = args["path"]
            self.workspace[path] = self.workspace.get(path, "") + args["line"] + "\n"
            return f"appended 1 line to {path}", False
        if name == ToolName.READ:
            text = self.workspace.get(args["path"])
            return (text, False) if text is not None else (f"ERROR: {args['path']}: no such file", True)
        if name == ToolName.WRITE:
            self.workspace[args["path"]] = args["content"]
            return f"wrote {len(args['content'])} characters to {args['path']}", False
        if name == ToolName.BASH:
            if WITNESS in args["command"]:
                self.workspace[WITNESS] = self.workspace.get(WITNESS, "") + "ran\n"
            return "exit code 0\n1 passed in 0.01s\n", False
        raise ValueError(f"the builder does not simulate {name}")

    # -- the result ------------------------------------------------------------------------
    def build(self) -> Observation:
        schedule = tuple(
            CrashStep(i.crashed_at, i.events[i.crashed_at - 1].kind, i.events[i.crashed_at - 1].label)
            for i in self.incarnations if i.crashed_at is not None)
        return Observation(
            case=Case(self.scenario, schedule),
            incarnations=self.incarnations,
            transcript=read_transcript(self.commits),
            requests=list(self.requests),
            workspace_before=dict(self.before),
            workspace_after=dict(self.workspace),
            deliveries=list(self.deliveries),
            resume_budget=self.resume_budget,
        )


def changelog_scenario(expect: Expect | None = None, *, resume_budget: int = 3) -> Scenario:
    """The running example, changelog (the verifier reads only its task and Expect)."""
    return Scenario(
        name="changelog", source="<tests>", description="append a line, run the tests, report",
        task=TASK, workspace=dict(START),
        tools=Tools((ToolName.READ, ToolName.APPEND_NOTE, ToolName.BASH), {}, {}),
        agent=AgentSettings(resume_budget=resume_budget), provider=ProviderSettings(), script=(),
        expect=expect or Expect(
            outcome=(ExpectOutcome.COMPLETED,),
            final_answer_contains=("1 passed",),
            lines=(LineRule(CHANGELOG, LINE, min=1, max=1,
                            missing_ok_if_crash_before=Boundary(K.EFFECT_BEFORE, "append_note")),),
        ),
    )


def crashed_at_append(b: ObservationBuilder) -> tuple[str, str, str]:
    """Incarnation 1 runs the task and is killed at effect.after:append_note: the line is in the
    file, the result is not in the store. Returns (run id, assistant id, reserved result id)."""
    run_id = b.start()
    assistant_id = b.ask(run_id, APPEND)
    result_id = b.started(run_id, assistant_id, APPEND)
    b.effect(APPEND)
    b.kill()
    return run_id, assistant_id, result_id


def recover_unknown(b: ObservationBuilder, run_id: str, result_id: str) -> str:
    """A recovery incarnation that stores the unknown outcome for call_1 and resumes."""
    b.incarnation()
    b.branch(B.CALL_UNKNOWN_RECORDED_NEVER)
    b.branch(B.CONTINUE_AFTER_TOOL_RESULT)
    return b.resume(run_id, [b.unknown(run_id, result_id, APPEND)], attempt=1)


def finish(b: ObservationBuilder, run_id: str) -> None:
    """The model reads the file (the line is there), runs the tests and answers; then the
    runner's settle incarnation finds nothing to do."""
    b.turn(run_id, READ)
    b.turn(run_id, BASH)
    b.ask(run_id, text=ANSWER)
    b.exit(0)
    b.settle()


def changelog_builder() -> ObservationBuilder:
    """The baseline: killed at effect.after:append_note, recovered with an unknown outcome."""
    b = ObservationBuilder()
    run_id, _, result_id = crashed_at_append(b)
    finish(b, recover_unknown(b, run_id, result_id))
    return b


def changelog_baseline() -> Observation:
    return changelog_builder().build()


# -- variants of the baseline, each one step away from it ------------------------------------
def lying_success_builder() -> ObservationBuilder:
    """Recovery stores a success result for call_1 without re-running it (a silent success)."""
    b = ObservationBuilder()
    run_id, _, result_id = crashed_at_append(b)
    b.incarnation()
    b.branch(B.CONTINUE_AFTER_TOOL_RESULT)
    fake = b.result_entry(run_id, result_id, APPEND, f"appended 1 line to {CHANGELOG}")
    finish(b, b.resume(run_id, [fake], attempt=1))
    return b


def reused_call_ids_builder() -> ObservationBuilder:
    """A provider that names every call `call_1`: pairing, sites and effects must stay per turn."""
    b = ObservationBuilder()
    run_id = b.start()
    b.turn(run_id, APPEND)
    b.turn(run_id, call("call_1", "read", path=CHANGELOG))
    b.turn(run_id, call("call_1", "bash", command=PYTEST))
    b.ask(run_id, text=ANSWER)
    b.exit(0)
    b.settle()
    return b


def rerun_builder(call: Call = APPEND, *, kill_at: BoundaryKind = K.COMMIT_AFTER,
                  policies: dict[str, str] | None = None) -> ObservationBuilder:
    """The incarnation running `call` is killed around its effect; the next one re-runs it.

    For append_note, incarnation 1 is killed and incarnation 2 re-runs it (whatever its policy:
    the builder plays an agent that breaks the rule). For read, the baseline runs on to the read,
    incarnation 2 is killed there and incarnation 3 re-runs it. `kill_at` is commit.after (of its
    tool_started), effect.before or effect.after.
    """
    b = ObservationBuilder()
    if call is APPEND:
        run_id = b.start()
        assistant_id = b.ask(run_id, APPEND)
        attempt = 1
    else:
        first, _, result_id = crashed_at_append(b)
        run_id = recover_unknown(b, first, result_id)
        assistant_id = b.ask(run_id, call)
        attempt = 2
    result_id = b.started(run_id, assistant_id, call)
    if kill_at is not K.COMMIT_AFTER:
        b.effect(call, upto=kill_at)
    b.kill()
    b.incarnation(policies=policies)
    b.branch(B.CALL_RERUN)
    b.branch(B.CONTINUE_AFTER_TOOL_RESULT)
    content, is_error = b.effect(call, recovery=True)
    repair = b.result_entry(run_id, result_id, call, content, is_error=is_error,
                            recovered=Recovered.RERUN)
    run_id = b.resume(run_id, [repair], attempt=attempt)
    if call is APPEND:
        finish(b, run_id)
    else:
        b.turn(run_id, BASH)
        b.ask(run_id, text=ANSWER)
        b.exit(0)
        b.settle()
    return b


def check(obs: Observation, scenario: Scenario | None = None) -> list[Violation]:
    """Verify against the changelog scenario unless a test supplies its own."""
    return verify(obs, scenario or changelog_scenario())


def ids(violations: list[Violation]) -> set[InvariantId]:
    return {v.invariant for v in violations}


# -- intent, reserved ids and durable commits (the verdict-power invariants) ------------------
def late_intent_builder() -> ObservationBuilder:
    """Crash-free, but append_note's tool_started is committed after the tool ran, just before
    its result (the mutant late-intent)."""
    b = ObservationBuilder()
    run_id = b.start()
    assistant_id = b.ask(run_id, APPEND)
    content, is_error = b.effect(APPEND)
    result_id = b.started(run_id, assistant_id, APPEND)
    b.result(run_id, result_id, APPEND, content, is_error=is_error)
    finish(b, run_id)
    return b


def torn_result_builder(dropped: int) -> tuple[ObservationBuilder, str, str]:
    """Killed (and torn) as append_note's result is written; the torn-tail repair drops the last
    `dropped` commits and a recovery incarnation has begun. Returns it, the run and result ids."""
    b = ObservationBuilder()
    run_id = b.start()
    assistant_id = b.ask(run_id, APPEND)
    result_id = b.started(run_id, assistant_id, APPEND)
    content, is_error = b.effect(APPEND)
    b.commit([b.result_entry(run_id, result_id, APPEND, content, is_error=is_error)],
             K.COMMIT_WRITTEN)
    b.kill()
    del b.commits[-dropped:]
    b.incarnation()
    b.branch(B.TORN_TAIL_REPAIRED)
    return b, run_id, result_id


def lost_intent_builder() -> ObservationBuilder:
    """The torn-tail repair drops the acknowledged tool_started too (the mutant
    repair-drops-one-more), so recovery sees a call that never started and stores an unknown
    outcome under a result id of its own."""
    b, run_id, _ = torn_result_builder(2)  # the torn result, and the good tool_started before it
    b.branch(B.CALL_UNKNOWN_NOT_STARTED)
    b.branch(B.CONTINUE_AFTER_TOOL_RESULT)
    repair = b.unknown(run_id, f"m{b.next_seq}.c-{APPEND['id']}", APPEND)
    finish(b, b.resume(run_id, [repair], attempt=1))
    return b
