"""The built-ins final-ends-run and retries-exhausted model what their invariants need."""

from __future__ import annotations

from typing import Any

from crashmatrix.fakes import Case as FakeCase
from crashmatrix.scenarios import Outcome, load_builtin

SYSTEM = {"role": "system", "content": "sys"}


def _reply(case: FakeCase, messages: list[dict[str, Any]]) -> dict[str, Any]:
    decision = case.handle({"messages": [SYSTEM, *messages]})
    assert decision.status == 200, decision.body
    assert decision.body is not None
    message: dict[str, Any] = decision.body["choices"][0]["message"]
    return message


def test_final_ends_run_acts_when_asked_again_after_its_answer() -> None:
    s = load_builtin()["final-ends-run"]
    assert s.expect.files == {"CHANGELOG.md": "# Changelog\n\nreleased 1.2\n"}
    case = FakeCase("k", s)
    history: list[dict[str, Any]] = [{"role": "user", "content": s.task}]
    first = _reply(case, history)
    (append,) = first["tool_calls"]
    history += [first, {"role": "tool", "tool_call_id": append["id"],
                        "content": "appended 1 line to CHANGELOG.md"}]
    answer = _reply(case, history)
    assert not answer.get("tool_calls")
    assert "released 1.2" in answer["content"]
    # Asked again after its final answer, the model appends the line once more.
    again = _reply(case, [*history, answer])
    assert [c["function"]["name"] for c in again["tool_calls"]] == ["append_note"]


def test_retries_exhausted_fails_every_request_after_the_first_reply() -> None:
    s = load_builtin()["retries-exhausted"]
    assert s.expect.outcome == (Outcome.FAILED,)
    assert s.agent.max_retries == 2
    case = FakeCase("k", s)
    history: list[dict[str, Any]] = [{"role": "user", "content": s.task}]
    first = _reply(case, history)
    (read,) = first["tool_calls"]
    history += [first, {"role": "tool", "tool_call_id": read["id"], "content": "ship on friday"}]
    # Far more failures than any crash schedule of the matrix can ask for.
    for _ in range(20):
        decision = case.handle({"messages": [SYSTEM, *history]})
        assert (decision.status, decision.fault is not None) == (500, True)
