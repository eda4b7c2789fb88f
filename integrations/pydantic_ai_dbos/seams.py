"""Pydantic AI's and DBOS's own boundaries as probe events, without editing framework code.

- Each function toolset of the agent (its plain function tools) has its `call_tool` wrapped (an
  instance attribute: Pydantic AI looks the method up on the toolset at every call), so a tool's
  run gives `effect.before` right before its function is called and `effect.after` once it
  returned (label: the tool's name, `call_id`: the model's tool-call id). The tool is no DBOS
  step: nothing is saved between the two, nor after.
- The agent's model (the one `DBOSModel` wraps, so inside the model-request step) has its
  `request` and `request_stream` wrapped: `provider.before` (`chat`, `messages`: the request's
  message count) and `provider.after` (`reply` with `tool_calls`, or `error` with `reason`).
  A step replayed from its recorded output calls no model, so gives neither.
- DBOS's system database: its class's `init_workflow`, `record_operation_result` and
  `update_workflow_outcome` (the writes recovery reads: the workflow's status and inputs, a
  step's output, the workflow's outcome) are wrapped, for the session's workflow only, so each
  gives `commit.before`, `commit.written` and `commit.after`, with the commit's `seq` and label
  as `store` numbers them. Everything else DBOS writes (migrations, the application version at
  every launch, queue and recovery bookkeeping from its background threads) is no commit: it
  holds none of the agent's state, and its timing is the threads'.

DBOS runs its database calls on worker threads (`asyncio.to_thread`), a recovered workflow on
its own event loop's thread, and sync tools on an executor: every probe goes through one lock
(one event at a time, in the order the threads reach it), and each commit's three events
and its write are one critical section. The agent's own commits are made one at a time, in the
workflow's order (each awaited before the next step), so their events come out in one order in
every run. A detached probe channel means the harness is gone: the process ends at once (exit 3).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from dbos._sys_db import SystemDatabase
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset

from crashmatrix.integrations.hosting import Commits, emit
from crashmatrix.integrations.pydantic_ai_dbos import store

_PROBED = "_crashmatrix_probed"  # marks an instance whose methods are wrapped already


def wrap_system_database(commits: Commits) -> None:
    """Probe the session workflow's commits in DBOS's system database (its class's methods: the
    instance is made inside `DBOS.launch()`, which recovers at once)."""
    cls: Any = SystemDatabase
    if getattr(cls, _PROBED, False):
        return
    init_workflow = cls.init_workflow
    record_operation_result = cls.record_operation_result
    update_workflow_outcome = cls.update_workflow_outcome

    @functools.wraps(init_workflow)
    def probed_init_workflow(self: Any, status: Any, *args: Any, **kwargs: Any) -> Any:
        # A recovery inits the workflow again (its attempt count): bookkeeping, no new commit.
        if status.get("workflow_uuid") != store.WORKFLOW_ID or commits.known(store.START_KEY):
            return init_workflow(self, status, *args, **kwargs)
        with commits.commit(store.START_KEY, "workflow.start"):
            return init_workflow(self, status, *args, **kwargs)

    @functools.wraps(record_operation_result)
    def probed_record_operation_result(self: Any, result: Any, *args: Any, **kwargs: Any) -> Any:
        if result.get("workflow_uuid") != store.WORKFLOW_ID:
            return record_operation_result(self, result, *args, **kwargs)
        key = store.step_key(store.WORKFLOW_ID, int(result["function_id"]))
        with commits.commit(key, store.step_label(str(result["function_name"]))):
            return record_operation_result(self, result, *args, **kwargs)

    @functools.wraps(update_workflow_outcome)
    def probed_update_workflow_outcome(self: Any, workflow_id: str, status: Any, *args: Any,
                                       **kwargs: Any) -> Any:
        label = store.FINAL.get(str(status))
        if workflow_id != store.WORKFLOW_ID or label is None:
            return update_workflow_outcome(self, workflow_id, status, *args, **kwargs)
        with commits.commit(store.OUTCOME_KEY, label):
            return update_workflow_outcome(self, workflow_id, status, *args, **kwargs)

    cls.init_workflow = probed_init_workflow
    cls.record_operation_result = probed_record_operation_result
    cls.update_workflow_outcome = probed_update_workflow_outcome
    setattr(cls, _PROBED, True)


def probe_toolset_calls(toolsets: Sequence[AbstractToolset[Any]]) -> None:
    """Wrap `call_tool` of every function toolset among these (and the toolsets they hold)."""

    def visit(toolset: AbstractToolset[Any]) -> None:
        if isinstance(toolset, FunctionToolset) and not getattr(toolset, _PROBED, False):
            _probe_call_tool(toolset)

    for toolset in toolsets:
        toolset.apply(visit)


def _probe_call_tool(toolset: FunctionToolset[Any]) -> None:
    call_tool = toolset.call_tool

    @functools.wraps(call_tool)
    async def probed_call_tool(name: str, tool_args: dict[str, Any], ctx: Any, tool: Any) -> Any:
        call_id = getattr(ctx, "tool_call_id", None)
        detail = {"call_id": str(call_id)} if call_id else {}
        emit("effect.before", name, **detail)
        try:
            return await call_tool(name, tool_args, ctx, tool)
        finally:
            # Returned, or raised: whatever it did is done.
            emit("effect.after", name, **detail)

    object.__setattr__(toolset, "call_tool", probed_call_tool)
    object.__setattr__(toolset, _PROBED, True)


def _calls_in(response: Any) -> int:
    return sum(1 for p in getattr(response, "parts", ()) if isinstance(p, ToolCallPart))


def probe_model(model: Any) -> None:
    """Wrap this model instance's requests in provider events (once)."""
    if getattr(model, _PROBED, False):
        return
    request, request_stream = model.request, model.request_stream

    @functools.wraps(request)
    async def probed_request(messages: list[Any], *args: Any, **kwargs: Any) -> ModelResponse:
        emit("provider.before", "chat", messages=len(messages))
        try:
            response: ModelResponse = await request(messages, *args, **kwargs)
        except Exception as exc:
            emit("provider.after", "error", reason=type(exc).__name__)
            raise
        emit("provider.after", "reply", tool_calls=_calls_in(response))
        return response

    @contextlib.asynccontextmanager
    async def probed_request_stream(messages: list[Any], *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        emit("provider.before", "chat", messages=len(messages))
        try:
            async with request_stream(messages, *args, **kwargs) as streamed:
                yield streamed
        except Exception as exc:
            emit("provider.after", "error", reason=type(exc).__name__)
            raise
        emit("provider.after", "reply", tool_calls=_calls_in(streamed.get()))

    object.__setattr__(model, "request", probed_request)
    object.__setattr__(model, "request_stream", probed_request_stream)
    object.__setattr__(model, _PROBED, True)


def install(agent: Any, models: Callable[[Any], Sequence[Any]]) -> None:
    """Probe the agent's tools and models (`models(agent)`: the model instances its requests
    reach)."""
    probe_toolset_calls(agent.toolsets)
    for model in models(agent):
        probe_model(model)
