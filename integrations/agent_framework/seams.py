"""Agent Framework's own boundaries as probe events, without editing framework code.

- Each function tool the workflow's agents hold (`FunctionTool`, one instance's `invoke`, which
  the framework's function-invocation loop calls with the model's call id whether or not
  function middleware is installed) gives `effect.before` (the tool's function is about to run)
  and `effect.after` (it returned, or raised: whatever it did is done). Label: the tool's name;
  `call_id`: the model's call id. The result is not saved yet: it reaches the store only in the
  checkpoint at the end of the superstep, after the whole agent turn.
- Each agent's chat client (one instance's `_inner_get_response`, the single call every chat
  client makes per model request, below the middleware and telemetry layers) gives
  `provider.before` (`chat`, `messages`) and `provider.after` (`reply` with `tool_calls`, or
  `error` with `reason`).
- The checkpoint storage the host hands the workflow wraps the user's `FileCheckpointStorage`:
  each `save` gives `commit.before`, `commit.written` and `commit.after`, with the commit's `seq`
  and label as `store` numbers them, so the harness can crash before, or after, each checkpoint.
  `written` and `after` both follow the file's `os.replace`: the storage has no step between.

The host runs everything the framework hands to worker threads (sync tools, the storage's file
writes) on the event loop's thread (`host.inline_loop`), so events come out in one order; an app
may still start threads of its own, so every probe goes through one lock. A detached probe
channel means the harness is gone: the process ends at once (exit 3).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

from agent_framework import CheckpointStorage, FunctionTool, WorkflowCheckpoint

from crashmatrix.integrations.agent_framework import store
from crashmatrix.integrations.hosting import Commits, emit, serialised

_PROBED = "_crashmatrix_probed"  # marks an instance whose method is wrapped already


class ProbedStorage:
    """A `CheckpointStorage` that probes each `save` of the storage it wraps (everything else
    is the inner storage's)."""

    def __init__(self, inner: CheckpointStorage, commits: Commits) -> None:
        self.inner = inner
        self._commits = commits

    async def save(self, checkpoint: WorkflowCheckpoint) -> str:
        seq = self._commits.seq(checkpoint.checkpoint_id)
        label = store.checkpoint_label(checkpoint.iteration_count)
        emit("commit.before", label, seq=seq)
        # The framework awaits each save before its next step; the lock is not held across the
        # await (it is a thread lock, and the write may run on an app's own executor).
        saved = await self.inner.save(checkpoint)  # an exception skips the events after it
        with serialised():
            emit("commit.written", label, seq=seq)
            emit("commit.after", label, seq=seq)
        return saved

    async def load(self, checkpoint_id: str) -> WorkflowCheckpoint:
        return await self.inner.load(checkpoint_id)

    async def list_checkpoints(self, *, workflow_name: str) -> list[WorkflowCheckpoint]:
        return await self.inner.list_checkpoints(workflow_name=workflow_name)

    async def delete(self, checkpoint_id: str) -> bool:
        return await self.inner.delete(checkpoint_id)

    async def get_latest(self, *, workflow_name: str) -> WorkflowCheckpoint | None:
        return await self.inner.get_latest(workflow_name=workflow_name)

    async def list_checkpoint_ids(self, *, workflow_name: str) -> list[str]:
        return await self.inner.list_checkpoint_ids(workflow_name=workflow_name)


def probe_tool(tool: FunctionTool) -> None:
    """Wrap this tool instance's `invoke` in effect events (once)."""
    if getattr(tool, _PROBED, False):
        return
    invoke = tool.invoke

    @functools.wraps(invoke)
    async def probed_invoke(*args: Any, **kwargs: Any) -> Any:
        call_id = kwargs.get("tool_call_id")
        detail = {"call_id": str(call_id)} if call_id else {}
        emit("effect.before", tool.name, **detail)
        try:
            return await invoke(*args, **kwargs)
        finally:
            emit("effect.after", tool.name, **detail)

    object.__setattr__(tool, "invoke", probed_invoke)
    object.__setattr__(tool, _PROBED, True)


def _calls_in(response: Any) -> int:
    return sum(1 for m in getattr(response, "messages", None) or []
               for c in getattr(m, "contents", None) or [] if getattr(c, "type", None) == "function_call")


def probe_client(client: Any) -> None:
    """Wrap this chat client instance's `_inner_get_response` in provider events (once).
    A streamed request (a `ResponseStream`) is reported when the call is made and when the
    stream is handed back: the host runs workflows unstreamed, so the framework asks for none."""
    inner: Callable[..., Any] | None = getattr(client, "_inner_get_response", None)
    if inner is None or getattr(client, _PROBED, False):
        return

    @functools.wraps(inner)
    def probed_inner(*args: Any, **kwargs: Any) -> Any:
        messages = kwargs.get("messages")
        emit("provider.before", "chat", messages=len(messages) if isinstance(messages, Sequence) else 0)
        try:
            result = inner(*args, **kwargs)
        except Exception as exc:
            emit("provider.after", "error", reason=type(exc).__name__)
            raise
        if not isinstance(result, Awaitable):
            emit("provider.after", "reply", tool_calls=0)
            return result
        return _awaited(result)

    async def _awaited(pending: Awaitable[Any]) -> Any:
        try:
            response = await pending
        except Exception as exc:
            emit("provider.after", "error", reason=type(exc).__name__)
            raise
        emit("provider.after", "reply", tool_calls=_calls_in(response))
        return response

    object.__setattr__(client, "_inner_get_response", probed_inner)
    object.__setattr__(client, _PROBED, True)


def agents_of(workflow: Any) -> Iterator[Any]:
    """The agents the workflow's executors run (an `AgentExecutor` holds its agent), descending
    into sub-workflows (`WorkflowExecutor`)."""
    seen: set[int] = set()
    todo = [workflow]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        for executor in (getattr(current, "executors", None) or {}).values():
            agent = getattr(executor, "_agent", None) or getattr(executor, "agent", None)
            if agent is not None:
                yield agent
            sub = getattr(executor, "workflow", None)
            if sub is not None:
                todo.append(sub)


def tools_of(agent: Any) -> list[Any]:
    """The tools an agent is built with (`default_options["tools"]`)."""
    options = getattr(agent, "default_options", None) or {}
    return list(options.get("tools") or [])


def probe_workflow(workflow: Any) -> None:
    """Probe the function tools and chat clients of every agent in the workflow."""
    for agent in agents_of(workflow):
        for tool in tools_of(agent):
            if isinstance(tool, FunctionTool):
                probe_tool(tool)
        client = getattr(agent, "client", None)
        if client is not None:
            probe_client(client)
