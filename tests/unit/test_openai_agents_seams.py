"""The Agents SDK seams number and label each session write as the store reader regroups them."""

from __future__ import annotations

import importlib.util
import os

import pytest

from crashmatrix.integrations.openai_agents import store
from tests.unit.test_openai_agents_store import APPEND, APPENDED, USER, WRITES, flat

# Skipped where the extra is not installed; never in CI (`CI` set), where a missing SDK fails.
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("agents") is None and not os.environ.get("CI"),
    reason="the OpenAI Agents SDK is not installed (pip install -e '.[openai-agents]')")


def test_each_write_gets_the_seq_and_label_the_reader_gives_its_commit() -> None:
    from crashmatrix.integrations.openai_agents import seams  # noqa: PLC0415 - needs the extra

    commits = seams.Commits([])
    assert [commits.next(w) for w in WRITES] == list(enumerate(store.labels(WRITES), 1))
    # A restarted process numbers its writes after the commits the session already holds, and
    # names a result's tool from a call an earlier write saved.
    again = seams.Commits(flat(WRITES[:1]))
    assert again.next([USER]) == (2, "message.user")
    assert again.next([APPEND, APPENDED]) == (3, "call.append_note,result.append_note")
    assert seams.Commits(flat([[USER], [APPEND]])).next([APPENDED]) == (3, "result.append_note")
