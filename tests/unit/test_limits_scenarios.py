"""`[agent] max_steps` and `[expect] turns`: read, checked, passed to the agent; the edge built-ins."""

from __future__ import annotations

from pathlib import Path

import pytest

from crashmatrix.harness.adapters.durable import DurableAgentAdapter
from crashmatrix.harness.adapters.interface import LaunchSpec
from crashmatrix.scenarios import Outcome, ScenarioError, load_builtin, load_file

MINIMAL = 'task = "do it"\n[[script]]\nreply.final = "done"\n'


def _write(tmp_path: Path, text: str, name: str = "x") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def error_of(tmp_path: Path, extra: str) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        load_file(_write(tmp_path, MINIMAL + extra))
    return info.value


def test_max_steps_and_turns_are_read_with_their_defaults(tmp_path: Path) -> None:
    s = load_file(_write(tmp_path, MINIMAL + "[agent]\nmax_steps = 2\n[expect]\nturns = 1\n"))
    assert (s.agent.max_steps, s.expect.turns) == (2, 1)
    plain = load_file(_write(tmp_path, MINIMAL, "plain"))
    assert (plain.agent.max_steps, plain.expect.turns) == (100, None)


@pytest.mark.parametrize(("extra", "field"), [
    ("[agent]\nmax_steps = 0\n", "agent.max_steps"),
    ("[expect]\nturns = -1\n", "expect.turns"),
])
def test_a_limit_out_of_range_names_its_field(tmp_path: Path, extra: str, field: str) -> None:
    assert error_of(tmp_path, extra).field == field


def _spec(max_steps: int) -> LaunchSpec:
    return LaunchSpec(session=Path("/c/session"), workspace=Path("/c/ws"), provider_url="http://p/v1",
                      tools=("read",), policies={}, resume_budget=2, max_retries=1,
                      retry_delay_s=0.0, provider_timeout_s=5.0, fsync=False, max_steps=max_steps)


def test_the_durable_adapter_passes_max_steps_on_every_start() -> None:
    adapter = DurableAgentAdapter()
    for argv in (adapter.start_args(_spec(2), "task"), adapter.recover_args(_spec(2))):
        assert argv[argv.index("--max-steps") + 1] == "2"


def test_the_edge_builtins_set_the_limit_they_reach() -> None:
    b = load_builtin()
    # Each limit N-1, N and N+1 (replies for max_steps, failures for max_retries): the N-1 of
    # one limit rides in the other's N scenario.
    under, at, over = b["max-retries-at"], b["max-steps-at"], b["max-steps-over"]
    assert [s.agent.max_steps for s in (under, at, over)] == [3, 2, 2]
    assert [s.expect.turns for s in (under, at, over)] == [2, 2, 2]
    assert [s.expect.outcome for s in (under, at, over)] == [
        (Outcome.COMPLETED,), (Outcome.COMPLETED,), (Outcome.FAILED,)]
    retries = [b[n] for n in ("max-steps-at", "max-retries-at", "retries-exhausted")]
    assert {s.agent.max_retries for s in retries} == {2}
    assert [sum(f.times for f in s.faults) for s in retries] == [1, 2, 1000]
    budget = b["resume-budget-edge"]
    assert (budget.agent.resume_budget, budget.matrix.crash_loop) == (2, 3)


def test_a_scenario_that_sets_max_steps_is_left_out_for_an_agent_not_told_the_limit() -> None:
    """A framework app is not told `[agent] max_steps` (it has a limit of its own): judged against
    one it never had, every case would fail. The scenario is left out for it, saying why."""
    from crashmatrix.harness.adapters.registry import resolve_agent  # noqa: PLC0415
    from crashmatrix.harness.adapters.requirements import misfit  # noqa: PLC0415
    from crashmatrix.scenarios import load_builtin  # noqa: PLC0415

    builtin = load_builtin()
    ours, baseline = resolve_agent("durable-agent"), resolve_agent("messages-only")
    for name in ("max-steps-at", "max-steps-over", "max-retries-at"):
        assert misfit(ours, builtin[name]) == []
        (why,) = misfit(baseline, builtin[name])
        assert why.startswith(f"scenario {name!r} sets [agent] max_steps = ")
        assert "declares no 'step-limit' capability" in why
    assert misfit(baseline, builtin["resume-budget-edge"]) == [], "the default step limit: no setting"
