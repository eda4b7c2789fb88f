"""LangGraph's own boundaries as probe events, without editing framework code.

- A LangChain callback handler, registered globally (a configure hook, as LangChain registers its
  own tracers), turns tool runs into `effect.before`/`effect.after` (label: the tool's name,
  `call_id`: the model's tool-call id) and chat-model calls into `provider.before`/
  `provider.after` (`reply` or `error`). Tool-end fires after the tool's effect and before
  LangGraph saves its result with `put_writes`: the window a crash there exposes.
- Wrappers around the checkpointer's `put` and `put_writes` (one instance's methods, set before
  the graph is invoked: LangGraph looks them up when a run starts) give each store write
  `commit.before`, `commit.written` and `commit.after`, with the commit's `seq` and label as
  `store` numbers them, so the harness can crash before, or after, each write.

LangGraph calls the checkpointer and runs tools on worker threads: every probe goes through one
lock (one event at a time, in the order the threads reach it), and each commit's three events
and its write are one critical section, so no other commit lands between them. A detached
probe channel means the harness is gone: the process ends at once (exit 3), from whichever
thread saw it.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.outputs import LLMResult
from langchain_core.tracers.context import register_configure_hook

from crashmatrix.integrations.hosting import Commits, emit
from crashmatrix.integrations.langgraph import store


def wrap_saver(saver: Any, commits: Commits) -> None:
    """Probe every `put` and `put_writes` of this checkpointer (same signatures: LangGraph reads
    `put_writes`'s to decide whether to pass `task_path`)."""
    put, put_writes = saver.put, saver.put_writes

    def probed_put(config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        ns = str(config["configurable"].get("checkpoint_ns", ""))
        key = store.checkpoint_key(ns, str(checkpoint["id"]))
        with commits.commit(key, store.checkpoint_label(metadata)):
            return put(config, checkpoint, metadata, new_versions)

    def probed_put_writes(config: Any, writes: Sequence[tuple[str, Any]], task_id: str,
                          task_path: str = "") -> None:
        conf = config["configurable"]
        key = store.writes_key(str(conf.get("checkpoint_ns", "")), str(conf["checkpoint_id"]), task_id)
        with commits.commit(key, store.writes_label(task_path)):
            put_writes(config, writes, task_id, task_path)

    saver.put, saver.put_writes = probed_put, probed_put_writes


class ProbeHandler(BaseCallbackHandler):
    """Tool runs and chat-model calls as effect and provider events."""

    raise_error = True  # a failing handler must not be logged and ignored

    def __init__(self) -> None:
        self._tools: dict[UUID, tuple[str, str | None]] = {}  # run id -> (tool, call id)
        self._chats: set[UUID] = set()

    def on_tool_start(self, serialized: dict[str, Any], input_str: str, *, run_id: UUID,
                      **kwargs: Any) -> None:
        name = str(kwargs.get("name") or (serialized or {}).get("name") or "tool")
        call_id = kwargs.get("tool_call_id")
        self._tools[run_id] = (name, str(call_id) if call_id else None)
        emit("effect.before", name, **({"call_id": str(call_id)} if call_id else {}))

    def _tool_done(self, run_id: UUID) -> None:
        started = self._tools.pop(run_id, None)
        if started is not None:
            name, call_id = started
            emit("effect.after", name, **({"call_id": call_id} if call_id else {}))

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._tool_done(run_id)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._tool_done(run_id)  # it returned, by raising: whatever it did is done

    def on_chat_model_start(self, serialized: dict[str, Any], messages: list[list[Any]], *,
                            run_id: UUID, **kwargs: Any) -> None:
        self._chats.add(run_id)
        emit("provider.before", "chat", messages=len(messages[0]) if messages else 0)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        if run_id in self._chats:
            self._chats.discard(run_id)
            calls = sum(len(getattr(getattr(g, "message", None), "tool_calls", None) or [])
                        for gens in response.generations for g in gens)
            emit("provider.after", "reply", tool_calls=calls)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        if run_id in self._chats:
            self._chats.discard(run_id)
            emit("provider.after", "error", reason=type(error).__name__)


_handler: ContextVar[BaseCallbackHandler | None] = ContextVar("crashmatrix_probes", default=None)
_installed = False


def install_handler() -> None:
    """Register the handler for every run in this process (its default reaches every thread)."""
    global _handler, _installed
    if _installed:
        return
    # The default, not a set() value: a default is seen from every thread, however started.
    _handler = ContextVar("crashmatrix_probes", default=ProbeHandler())  # noqa: B039 - one per process
    register_configure_hook(_handler, True)
    _installed = True
