"""The "messages only" baseline (docs/architecture.md): it persists history but has no recovery rules."""

from __future__ import annotations

from crashmatrix.agent import records as R
from crashmatrix.agent.loop import Agent
from crashmatrix.agent.probe import ProbeKind, probe
from crashmatrix.agent.records import Entry, Role
from crashmatrix.agent.recovery import parse_args
from crashmatrix.agent.tools import CallContext, ToolResult, invoke
from crashmatrix.harness.mutants.patching import Patcher
from crashmatrix.harness.mutants.recovery_faults import drop_tool_started


def _answer(agent: Agent, run_id: str, call_id: str, tool_name: str, args_json: str,
            msg_id: str) -> Entry:
    tool = agent.registry.get(tool_name)
    args = parse_args(args_json)
    if tool is None or args is None:
        result = ToolResult(f"ERROR: cannot run {tool_name!r}", is_error=True)
    else:
        probe(ProbeKind.EFFECT_BEFORE, tool_name, call_id=call_id, recovery=True)
        result = invoke(tool, agent.config.workspace, args,
                        context=CallContext(msg_id, call_id, rerun=True))
        probe(ProbeKind.EFFECT_AFTER, tool_name, call_id=call_id, recovery=True)
    return R.message(msg_id, run_id, Role.TOOL, result.content, tool_call_id=call_id,
                     tool_name=tool_name, is_error=result.is_error, terminate=result.terminate)


def recover(self: Agent, start_queued: bool = True) -> str | None:
    """Pick the open run up where the history ends: run what has no result, ask the model again.

    No replay policies, no unknown outcomes, no resume records or budget, no check of why the
    run stopped: the history is all there is.
    """
    run = self.state.open_run()
    if run is None:
        return self._start_from_queued_inputs() if start_queued else None
    pending = self.state.pending_calls()
    ids = self._ids(len(pending))
    answers = [_answer(self, run.run_id, c.call_id, c.tool, c.args_json, msg_id)
               for msg_id, c in zip(ids, pending, strict=True)]
    if answers:
        self.commit(answers)
    return self.drive(run.run_id)


def messages_only(p: Patcher) -> None:
    drop_tool_started(p)
    p.replace(Agent, "recover", recover)
