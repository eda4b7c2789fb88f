"""The Agents SDK's own boundaries as probe events, without editing framework code.

- Run hooks (`RunHooks`, passed to `Runner.run_sync`, the SDK's public lifecycle API) turn each
  function tool's invocation into `effect.before` (`on_tool_start`, right before the tool's
  function is called) and `effect.after` (`on_tool_end`, once it returned: its output is not
  saved yet, the SDK saves the call and its output together at the end of the turn). Label: the
  tool's name; `call_id`: the model's call id.
- The model's fetch: `get_response` and `stream_response` of every model the run uses (the
  instances the run's model provider hands out, and a `Model` instance an agent names itself)
  are wrapped, so each request gives `provider.before` (`chat`, `messages`: the input items and
  the instructions) and `provider.after` (`reply` with `tool_calls`, or `error` with `reason`).
  The instance keeps its class: the SDK's own checks of the model's type still see it.
- A wrapper around the session's `add_items` (one instance's method: the SDK looks it up on the
  session at every write) gives each store write `commit.before`, `commit.written` and
  `commit.after`, with the commit's `seq` and label as `store` numbers them, so the harness can
  crash before, or after, each write. `written` and `after` both follow SQLite's commit: the
  SDK has no step between them.

The SDK hands the session's SQLite calls and sync tools to worker threads (`asyncio.to_thread`;
the host runs them on the loop's thread, `host.inline_loop` says why), and an app may start
threads of its own: every probe goes through one lock (the events of one step stay together). A
detached probe channel means the harness is gone: the process ends at once (exit 3).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from agents import Agent, Model, ModelProvider, RunContextWrapper, RunHooks, SQLiteSession, Tool
from agents.items import ModelResponse

from crashmatrix.integrations.hosting import emit
from crashmatrix.integrations.openai_agents import store

_PROBED = "_crashmatrix_probed"  # marks a model instance whose methods are wrapped already


class ProbeHooks(RunHooks[Any]):
    """Function tool invocations as effect events."""

    @staticmethod
    def _call_id(context: RunContextWrapper[Any]) -> dict[str, str]:
        call_id = getattr(context, "tool_call_id", None)  # a ToolContext for function tools
        return {"call_id": str(call_id)} if call_id else {}

    async def on_tool_start(self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool) -> None:
        emit("effect.before", tool.name, **self._call_id(context))

    async def on_tool_end(self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool,
                          result: object) -> None:
        emit("effect.after", tool.name, **self._call_id(context))


def _request_size(system_instructions: str | None, items: Any) -> int:
    return (1 if system_instructions else 0) + (len(items) if isinstance(items, list) else 1)


def _calls_in(output: Sequence[Any]) -> int:
    return sum(1 for item in output if getattr(item, "type", None) == "function_call")


def probe_model(model: Model) -> Model:
    """Wrap this model instance's fetch calls in provider events (once; returns the model)."""
    if getattr(model, _PROBED, False):
        return model
    get_response, stream_response = model.get_response, model.stream_response

    @functools.wraps(get_response)
    async def probed_get_response(system_instructions: str | None, input: Any, *args: Any,
                                  **kwargs: Any) -> ModelResponse:
        emit("provider.before", "chat", messages=_request_size(system_instructions, input))
        try:
            response = await get_response(system_instructions, input, *args, **kwargs)
        except Exception as exc:
            emit("provider.after", "error", reason=type(exc).__name__)
            raise
        emit("provider.after", "reply", tool_calls=_calls_in(response.output))
        return response

    @functools.wraps(stream_response)
    async def probed_stream_response(system_instructions: str | None, input: Any, *args: Any,
                                     **kwargs: Any) -> AsyncIterator[Any]:
        emit("provider.before", "chat", messages=_request_size(system_instructions, input))
        calls = 0
        try:
            async for event in stream_response(system_instructions, input, *args, **kwargs):
                done: Any = event  # the completed event carries the whole response
                if getattr(done, "type", None) == "response.completed":
                    calls = _calls_in(done.response.output)
                yield event
        except Exception as exc:
            emit("provider.after", "error", reason=type(exc).__name__)
            raise
        emit("provider.after", "reply", tool_calls=calls)

    # Instance attributes shadow the class's methods for this model only.
    object.__setattr__(model, "get_response", probed_get_response)
    object.__setattr__(model, "stream_response", probed_stream_response)
    object.__setattr__(model, _PROBED, True)
    return model


class ProbedProvider(ModelProvider):
    """The run's model provider, handing out models whose fetch calls are probed."""

    def __init__(self, inner: ModelProvider) -> None:
        self._inner = inner

    def get_model(self, model_name: str | None) -> Model:
        return probe_model(self._inner.get_model(model_name))

    async def aclose(self) -> None:
        close: Callable[[], Any] | None = getattr(self._inner, "aclose", None)
        if close is not None:
            await close()


def probe_agent_models(agent: Agent[Any]) -> None:
    """Probe the `Model` instances the agent and the agents it hands off to name themselves
    (a model named by a string comes from the provider, probed there)."""
    seen: set[int] = set()
    todo: list[Any] = [agent]
    while todo:
        current = todo.pop()
        if id(current) in seen or not isinstance(current, Agent):
            continue
        seen.add(id(current))
        if isinstance(current.model, Model):
            probe_model(current.model)
        for handoff in current.handoffs:
            todo.append(handoff if isinstance(handoff, Agent) else getattr(handoff, "agent", None))


class Commits:
    """The seq of each session write: the commits the session held when the process started,
    then one per `add_items` call that writes anything."""

    def __init__(self, existing: Sequence[store.Item]) -> None:
        self.count = len(store.group(existing))
        self._names = {str(i.get("call_id")): str(i.get("name")) for i in existing
                       if i.get("type") == "function_call"}

    def next(self, items: Sequence[store.Item]) -> tuple[int, str]:
        label = store.commit_label(items, self._names)
        self._names.update({str(i.get("call_id")): str(i.get("name")) for i in items
                            if i.get("type") == "function_call"})
        self.count += 1
        return self.count, label


def wrap_session(session: SQLiteSession, commits: Commits) -> None:
    """Probe every `add_items` of this session (same signature: the SDK inspects it to decide
    whether to pass its context wrapper)."""
    add_items = session.add_items

    async def probed_add_items(items: list[Any]) -> None:
        if not items:
            return await add_items(items)  # the SDK's own no-op: nothing is written
        # The SDK awaits each write before its next step, so no other commit can land between
        # these events; the lock is not held across the await (an app may run it on a worker thread).
        seq, label = commits.next(items)
        emit("commit.before", label, seq=seq)
        await add_items(items)  # an exception skips the events after it (it never landed)
        emit("commit.written", label, seq=seq)
        emit("commit.after", label, seq=seq)
        return None

    object.__setattr__(session, "add_items", probed_add_items)
