"""continuation's shortcut: a request's message is taken as read alike only when it is the
committed one exactly, as JSON too (Python's == takes True, 1 and 1.0 for one another)."""

from __future__ import annotations

import pytest

from crashmatrix.harness.verify.continuation import _Committed, _first_difference


@pytest.mark.parametrize(("sent", "committed"), [(True, 1), (1.0, 1), (1, True)])
def test_values_python_takes_as_equal_are_read_apart(sent: object, committed: object) -> None:
    def message(value: object) -> dict[str, object]:
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "t", "arguments": {"n": value}}}]}

    wire = [message(committed)]
    assert message(sent) == wire[0]  # the quirk the shortcut must not fall for
    assert _first_difference([message(sent)], [_Committed(m) for m in wire]) == 0
    assert _first_difference([message(committed)], [_Committed(m) for m in wire]) is None
