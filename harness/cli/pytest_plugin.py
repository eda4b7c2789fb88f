"""pytest plugin: `pytest --crashmatrix` collects one test per crash case, named by its case id.

Inert unless `--crashmatrix` is given. Collection records each scenario once (deterministic, so
every xdist worker collects the same ids in the same order); each test then runs its case against
a fake provider private to its worker process.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from crashmatrix.harness.records.results import DEFAULT_AGENT, DEFAULT_TIMEOUT_S

if TYPE_CHECKING:
    from collections.abc import Callable

    from crashmatrix.harness.execution.crash_states import CrashStates
    from crashmatrix.harness.records.baseline import Baseline
    from crashmatrix.harness.records.case import Case
    from crashmatrix.harness.records.observation import Observation
    from crashmatrix.harness.records.results import CaseResult
    from crashmatrix.scenarios.model import Scenario

# The harness is imported only when --crashmatrix is given: the plugin is installed with the
# package, so every pytest run anywhere (including the scenarios' own `pytest -q`) loads this
# module, and importing the harness would cost more than a small test suite.


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("crashmatrix", "crash matrices of durable agents")
    group.addoption("--crashmatrix", action="store_true", help="collect one test per crash case")
    group.addoption("--crashmatrix-scenario", action="append", default=[], metavar="NAME",
                    help="scenario to collect (repeatable; default: all)")
    group.addoption("--crashmatrix-scenarios", action="append", default=[], metavar="DIR",
                    help="also load scenarios from DIR (repeatable)")
    group.addoption("--crashmatrix-agent", default=None, metavar="NAME",
                    help="agent under test: a registered adapter name, package.module:attr or "
                         f"mutant:NAME (default: the crashmatrix_agent ini value, else {DEFAULT_AGENT})")
    parser.addini("crashmatrix_agent", "agent under test for --crashmatrix (as --crashmatrix-agent)",
                  default=DEFAULT_AGENT)
    group.addoption("--crashmatrix-timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="S",
                    help="per-case deadline")
    group.addoption("--crashmatrix-spawn", choices=("fork", "fresh"), default="fork",
                    help="fork: incarnations fork from a zygote that imported the agent once (as "
                         "`crashmatrix run` does); fresh: a new interpreter each")
    group.addoption("--crashmatrix-fault", action="append", default=[], metavar="NAME",
                    help="fault kind to enumerate (repeatable; default: kill, second, torn; with "
                         "power, the agent is run with fsync on)")
    # A project pins its matrix in its ini file; the command-line options override each key.
    parser.addini("crashmatrix_scenarios", "scenario folders for --crashmatrix (relative to the ini "
                  "file; as --crashmatrix-scenarios)", type="paths", default=[])
    parser.addini("crashmatrix_scenario", "scenarios to collect (as --crashmatrix-scenario)",
                  type="args", default=[])
    parser.addini("crashmatrix_fault", "fault kinds to enumerate (as --crashmatrix-fault)",
                  type="args", default=[])
    parser.addini("crashmatrix_states", "start crash cases from crash states (as --crashmatrix-states)",
                  type="bool", default=False)
    group.addoption("--crashmatrix-baseline", default=None, metavar="FILE",
                    help="known failures (`crashmatrix baseline` writes them): a listed case that "
                         "fails again is xfail; one that holds now fails as XPASS(strict) would "
                         "(default: the crashmatrix_baseline ini value)")
    parser.addini("crashmatrix_baseline", "known failures for --crashmatrix (as --crashmatrix-baseline)",
                  default="")
    group.addoption("--crashmatrix-depth", type=int, default=None, metavar="N",
                    help="crash up to N times per case (default: the crashmatrix_depth ini value, "
                         "else 1): each single-crash test also runs the deeper cases that crash "
                         "its recoveries, and fails naming any that did not hold")
    parser.addini("crashmatrix_depth", "crashes per case for --crashmatrix (as --crashmatrix-depth)",
                  default="1")
    group.addoption("--crashmatrix-states", action="store_true",
                    help="start crash cases from crash states recorded at collection, one recovery "
                         "per distinct state (as `crashmatrix run --states`; for an agent that "
                         "declares state-in-tree)")
    group.addoption("--crashmatrix-arrivals", action="store_true",
                    help="also deliver each scenario input and cancel at every kind of point its "
                         "run passes, each point a scenario of its own (as `crashmatrix run "
                         "--arrivals`)")
    parser.addini("crashmatrix_arrivals", "arrival-timing variants too (as --crashmatrix-arrivals)",
                  type="bool", default=False)
    group.addoption("--crashmatrix-syscalls", action="store_true",
                    help="also crash at every store call between probe events, in the recording, "
                         "its settle and (with --crashmatrix-depth 2) each recovery, probes on "
                         "(as `crashmatrix run --syscalls`; needs strace)")
    parser.addini("crashmatrix_syscalls", "system-call crash points too (as --crashmatrix-syscalls)",
                  type="bool", default=False)


def pytest_configure(config: pytest.Config) -> None:
    # Registered here, so a project running pytest with --strict-markers can select by it.
    config.addinivalue_line("markers", "crash: a crash case of crashmatrix (collected by --crashmatrix)")


@pytest.fixture
def crashmatrix_run(pytestconfig: pytest.Config) -> Callable[..., list[CaseResult]]:
    """`crashmatrix.harness.api.run_matrix`, its defaults the project's ini values (agent,
    scenario folders and names, faults): a test runs a matrix, or one case, and asserts on it."""
    from crashmatrix.harness.api import run_matrix  # noqa: PLC0415 - inert unless used

    defaults: dict[str, Any] = {"agent": _agent_name(pytestconfig), "faults": _fault_names(pytestconfig),
                                "scenario_dirs": _scenario_dirs(pytestconfig),
                                "scenarios": _scenario_names(pytestconfig), "depth": _depth(pytestconfig)}

    def run(**given: Any) -> list[CaseResult]:
        return run_matrix(**{**defaults, **given})

    return run


def _agent_name(config: pytest.Config) -> str:
    """--crashmatrix-agent, else the `crashmatrix_agent` ini value (a project pins its agent)."""
    return str(config.getoption("crashmatrix_agent") or config.getini("crashmatrix_agent"))


def _scenario_dirs(config: pytest.Config) -> list[str]:
    given = config.getoption("crashmatrix_scenarios")
    return list(given) if given else [str(p) for p in config.getini("crashmatrix_scenarios")]


def _scenario_names(config: pytest.Config) -> list[str]:
    return list(config.getoption("crashmatrix_scenario") or config.getini("crashmatrix_scenario"))


def _fault_names(config: pytest.Config) -> list[str]:
    return list(config.getoption("crashmatrix_fault") or config.getini("crashmatrix_fault"))


def _depth(config: pytest.Config) -> int:
    given = config.getoption("crashmatrix_depth")
    text = given if given is not None else config.getini("crashmatrix_depth")
    try:
        depth = int(str(text))
    except ValueError:
        depth = 0
    if depth < 1:
        where = "--crashmatrix-depth" if given is not None else f"crashmatrix_depth in {config.inipath}"
        raise pytest.UsageError(f"{where}: {str(text)!r} is not a whole number of crashes, 1 or more")
    return depth


def _states_on(config: pytest.Config) -> bool:
    return bool(config.getoption("crashmatrix_states") or config.getini("crashmatrix_states"))


def _syscalls_on(config: pytest.Config) -> bool:
    return bool(config.getoption("crashmatrix_syscalls") or config.getini("crashmatrix_syscalls"))


def _baseline_of(config: pytest.Config) -> Baseline | None:
    """--crashmatrix-baseline, else the `crashmatrix_baseline` ini value (relative to the ini
    file's folder, as a project writes it)."""
    from crashmatrix.harness.records.baseline import BaselineError, read  # noqa: PLC0415

    given = config.getoption("crashmatrix_baseline")
    named = given or config.getini("crashmatrix_baseline")
    if not named:
        return None
    path = Path(str(named))
    if not given and not path.is_absolute() and config.inipath is not None:
        path = config.inipath.parent / path
    try:
        return read(path)
    except BaselineError as exc:
        raise pytest.UsageError(f"--crashmatrix-baseline: {exc}") from None


class CaseFailed(Exception):
    """A case violated invariants; its text is the report."""


class _Host:
    """One fake provider and work directory per pytest process (xdist worker)."""

    def __init__(self, config: pytest.Config) -> None:
        from crashmatrix.fakes import FakeDownstream, FakeProvider  # noqa: PLC0415 - see the note on imports above
        from crashmatrix.harness.adapters.registry import AgentChoiceError, resolve_agent  # noqa: PLC0415
        from crashmatrix.harness.cli.traced_modes import syscalls_problem  # noqa: PLC0415
        from crashmatrix.harness.execution.fs_trace import TracerMissing, strace_path  # noqa: PLC0415
        from crashmatrix.harness.execution.runner import RunnerConfig  # noqa: PLC0415
        from crashmatrix.harness.execution.scratch import scratch_dir  # noqa: PLC0415
        from crashmatrix.harness.execution.spawn import SpawnMode  # noqa: PLC0415
        from crashmatrix.harness.execution.spawners import make_spawner  # noqa: PLC0415
        from crashmatrix.harness.faults.registry import FAULTS, check_selection, observing  # noqa: PLC0415

        try:
            adapter = resolve_agent(_agent_name(config))
        except AgentChoiceError as exc:
            raise pytest.UsageError(f"--crashmatrix-agent: {exc}") from None
        named = tuple(dict.fromkeys(_fault_names(config)))
        self.faults: tuple[str, ...] | None = named or None
        problems = check_selection(named, adapter)
        if problems:
            raise pytest.UsageError("; ".join(problems))
        # A power loss keeps only what was synced: the agent is asked to sync, as `run` does.
        power = observing(f for f in FAULTS.all() if f.name in named)
        if power:
            try:
                strace_path()
            except TracerMissing as exc:
                raise pytest.UsageError(str(exc)) from None
        # --crashmatrix-syscalls: traced recordings, settles and (deeper) recoveries, as `run --syscalls`.
        self.syscalls = _syscalls_on(config)
        problem = syscalls_problem(adapter, self.faults) if self.syscalls else None
        if problem is not None:
            raise pytest.UsageError(problem[0].replace("--syscalls", "--crashmatrix-syscalls", 1))
        # As `run` does: a zygote that imported the agent once forks every incarnation (an agent
        # with no Python entry point is started fresh whatever the option says).
        mode = SpawnMode(config.getoption("crashmatrix_spawn"))
        self.spawner = make_spawner(mode, list(adapter.python.preload) if adapter.python else None)
        self.provider = FakeProvider()
        self.provider.start()
        self.downstream = FakeDownstream().start()
        self.tmp = scratch_dir(prefix="crashmatrix-pytest-")
        self.runner_config = RunnerConfig(
            adapter=adapter, provider=self.provider, downstream=self.downstream,
            work_root=Path(self.tmp.name), case_timeout_s=config.getoption("crashmatrix_timeout"),
            agent_ref=_agent_name(config), fsync=power, spawner=self.spawner, syscalls=self.syscalls)
        self.depth = _depth(config)
        self.dirs: list[str] = _scenario_dirs(config)
        self.baseline = _baseline_of(config)
        # --crashmatrix-states: collection's recording keeps its snapshots, and each test starts
        # from its own (crash_states.py). Items run one at a time per worker: a shared recovery
        # or a second-process host is run by the first test that needs it, within that test.
        self.states: CrashStates | None = None
        self.recordings: dict[str, Observation] = {}
        if _states_on(config):
            from crashmatrix.harness.execution.crash_states import CrashStates  # noqa: PLC0415
            from crashmatrix.harness.execution.runner import CaseRunner  # noqa: PLC0415

            if not CrashStates.supported(adapter.capabilities):
                raise pytest.UsageError(
                    f"--crashmatrix-states: agent {adapter.name!r} does not declare 'state-in-tree' "
                    "(its recovery may read state outside the case tree): run without it")
            self.states = CrashStates(CaseRunner(self.runner_config), Path(self.tmp.name))

    def observe(self, case: Case, scenario: Scenario, may_extend: bool = False) -> Observation:
        """The case's observation: from a crash state when it can start from one, else run.
        `may_extend`: deeper cases will start from this one's recovery (--crashmatrix-depth)."""
        from crashmatrix.harness.execution.runner import CaseRunner  # noqa: PLC0415

        # As `run` does: a case deeper ones extend traces its finisher and settle; one with a
        # system-call step is killed by the tracer, and neither starts from a crash state.
        traced = self.syscalls and may_extend and not case.crashes_settle
        if self.states is None or case.crashes_settle:
            return CaseRunner(self.runner_config).run(case, scenario, trace_finisher=traced)
        if not case.schedule and scenario.name in self.recordings:
            return self.recordings[scenario.name]  # collection ran it, snapshots and all
        if not traced and not any(s.at_call for s in case.schedule) and self.states.usable(case, scenario):
            return self.states.run(case, scenario, may_extend=may_extend)[0]
        return self.states.record(case, scenario, may_extend=may_extend, trace_finisher=traced)

    def record(self, scenario: Scenario) -> Observation:
        """The scenario's crash-free run, which enumerates its cases (kept, with --crashmatrix-states,
        with a snapshot at every crash point)."""
        from crashmatrix.harness.execution.runner import CaseRunner  # noqa: PLC0415
        from crashmatrix.harness.records.case import Case  # noqa: PLC0415

        if self.states is None:
            runner = CaseRunner(self.runner_config)
            return runner.run(Case(scenario.name), scenario, trace_finisher=self.syscalls)
        obs = self.states.record(Case(scenario.name), scenario, may_extend=True, trace_finisher=self.syscalls)
        self.recordings[scenario.name] = obs
        return obs

    def close(self) -> None:
        self.provider.stop()
        self.downstream.stop()
        self.spawner.close()
        self.tmp.cleanup()


_HOST_KEY = pytest.StashKey[_Host]()


def _host(config: pytest.Config) -> _Host:
    if _HOST_KEY not in config.stash:
        config.stash[_HOST_KEY] = _Host(config)
    return config.stash[_HOST_KEY]


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """With --crashmatrix-states, how many crash points mapped to how many states (as `run` says;
    under xdist each worker keeps its own states, so the line is printed where tests ran here)."""
    host = config.stash.get(_HOST_KEY, None)
    if host is None or host.states is None or not host.states.tally.points:
        return
    from crashmatrix.harness.cli.run import states_line, states_record  # noqa: PLC0415

    record = states_record(host.states.tally, host.states.settled.reused)
    terminalreporter.write_line(f"crashmatrix: --crashmatrix-states: {states_line(record)}")


def pytest_unconfigure(config: pytest.Config) -> None:
    if _HOST_KEY in config.stash:
        config.stash[_HOST_KEY].close()


class CaseItem(pytest.Item):
    def __init__(self, *, case: Case, scenario: Scenario, crashes: int = 1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.scenario = scenario
        self.crashes = crashes  # the crash cases collected beside this scenario's recording

    def runtest(self) -> None:
        host = _host(self.config)
        result, _ = self._judged(self.case)
        failures = self._failures(result)
        deeper = self._deeper(result) if self.case.schedule and (host.depth > 1 or result.variants) else []
        failures += [line for r in deeper for line in self._failures(r)]
        if failures:
            if deeper:
                recoveries = f"that crash its recoveries (--crashmatrix-depth {host.depth})"
                if not any(r.variants for r in [result, *deeper]):
                    head = f"the {len(deeper)} deeper case(s) {recoveries}"
                else:
                    also = f" and those {recoveries}" if host.depth > 1 else ""
                    head = (f"the {len(deeper)} case(s) run within it, the other states of its crash "
                            f"points (a fault's variants){also}")
                failures.insert(0, f"{self.case.case_id} and {head}:")
            raise CaseFailed("\n".join(failures))
        known = host.baseline
        if known is not None and known.cases.get(result.case) is not None and not result.ok:
            from crashmatrix.harness.records.results import Verdict  # noqa: PLC0415

            if result.verdict is not Verdict.ERROR:
                broke = ", ".join(result.invariants) or result.verdict.value
                pytest.xfail(f"known failure (baseline): {broke}")
        if not self.case.schedule and not self.crashes:
            # The recording held but gave no crash point: a green suite would prove nothing
            # about recovery (issue 33, O1), so its one item fails and says why.
            from crashmatrix.harness.records.uncrashed import uncrashed  # noqa: PLC0415

            why = uncrashed([result]).get(result.scenario, "it gave no crash point")
            raise CaseFailed(f"{result.case}: no case crashed anything: {why}, so nothing about "
                             "recovery was tested")

    def _judged(self, case: Case) -> tuple[CaseResult, Observation]:
        from crashmatrix.harness.cli.portable import portable_paths  # noqa: PLC0415
        from crashmatrix.harness.evaluate import evaluate  # noqa: PLC0415

        host = _host(self.config)
        obs = host.observe(case, self.scenario, may_extend=bool(case.schedule) and case.depth < host.depth)
        result = evaluate(obs, self.scenario, fsync=host.runner_config.fsync, agent=host.runner_config.agent,
                          scenario_dirs=portable_paths(host.dirs), duration_ms=0.0,
                          timeout_s=host.runner_config.case_timeout_s)
        return result, obs

    def _deeper(self, result: CaseResult) -> list[CaseResult]:
        """The cases that crash this one's recoveries, up to the depth asked, depth first (as
        `run --depth` enumerates them: every event of the incarnation that finished the work),
        and the other states of each one's last crash point (the variants its fault offered)."""
        from crashmatrix.harness.enumeration import extensions, variant_siblings  # noqa: PLC0415
        from crashmatrix.harness.faults.registry import faults_for  # noqa: PLC0415
        from crashmatrix.harness.records.results import Verdict  # noqa: PLC0415

        host = _host(self.config)
        faults = faults_for(host.runner_config.adapter, host.faults)
        found: list[CaseResult] = []
        todo = [(self.case, result)]
        while todo:
            case, done = todo.pop()
            if done.verdict not in (Verdict.PASS, Verdict.FAIL):
                continue
            children = variant_siblings(case, done.variants)
            if case.depth < host.depth:
                children += extensions(case, done.trace, faults, done.downstream, done.syscall_points)
            for child in reversed(children):
                child_result, _ = self._judged(child)
                found.append(child_result)
                todo.append((child, child_result))
        return sorted(found, key=lambda r: r.case)

    def _failures(self, result: CaseResult) -> list[str]:
        """What to report of one case: nothing if it held, or failed as the baseline expects;
        its violations and repro line if it failed anew; an XPASS if it is listed and holds."""
        known = _host(self.config).baseline
        listed = known.cases.get(result.case) if known is not None else None
        if listed is not None and result.ok:
            return [f"{result.case}: XPASS(strict): listed as a known failure [{', '.join(listed)}] "
                    "in the baseline, and it holds now: remove it"]
        if result.ok or (listed is not None and result.verdict.value != "error"):
            return []
        lines = [f"{result.case}: {result.verdict.value}"]
        lines += [f"  {v['invariant']}: {v['message']}" for v in result.violations]
        if result.note:
            lines.append(f"  {result.note}")
        lines.append(f"  reproduce: {result.repro}")
        return lines

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, CaseFailed):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return Path(self.scenario.source), None, f"crashmatrix case {self.case.case_id}"


class MatrixCollector(pytest.Collector):
    def __init__(self, *, scenarios: list[Scenario], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenarios = scenarios

    def collect(self) -> Iterator[CaseItem]:
        from crashmatrix.harness.enumeration import single_crash_cases  # noqa: PLC0415
        from crashmatrix.harness.faults.registry import faults_for  # noqa: PLC0415
        from crashmatrix.harness.records.case import Case  # noqa: PLC0415

        host = _host(self.config)
        faults = faults_for(host.runner_config.adapter, host.faults)
        for scenario in self.scenarios:
            obs = host.record(scenario)
            first = [e.point for e in obs.incarnations[0].events] if obs.incarnations else []
            # --crashmatrix-syscalls: the recording's and its settle's calls (none traced without).
            calls = [inc.store_calls for inc in obs.incarnations[:2]] + [[], []]
            cases = single_crash_cases(scenario.name, first, faults, obs.requests_of(1), calls[0], calls[1])
            if host.states is not None:
                host.states.expect(cases)  # second-process cases of one recording share a host
            for case in [Case(scenario.name), *cases]:
                item = CaseItem.from_parent(self, name=case.case_id, case=case, scenario=scenario,
                                            crashes=len(cases))
                item.add_marker(pytest.mark.crash)  # `-m crash` selects them, `-m "not crash"` the rest
                yield item


def _say_arrivals(line: str) -> None:
    sys.stderr.write(f"crashmatrix: --arrivals: {line}\n")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    if not config.getoption("crashmatrix"):
        return
    from crashmatrix.scenarios import ScenarioError, load_all, resolve  # noqa: PLC0415

    names = _scenario_names(config)
    dirs = _scenario_dirs(config)
    try:
        scenarios = resolve(names, dirs) if names else list(load_all(dirs).values())
    except ScenarioError as exc:
        raise pytest.UsageError(f"crashmatrix: {exc}") from None
    from crashmatrix.harness.adapters.interface import PreflightError  # noqa: PLC0415
    from crashmatrix.harness.adapters.requirements import unmet  # noqa: PLC0415

    try:
        problems = unmet(_host(config).runner_config.adapter, scenarios)
    except PreflightError as exc:
        raise pytest.UsageError(f"crashmatrix: {exc}") from None
    if problems:
        raise pytest.UsageError("crashmatrix: " + "; ".join(problems))
    if config.getoption("crashmatrix_arrivals") or config.getini("crashmatrix_arrivals"):
        from crashmatrix.harness.execution.arrivals import with_arrivals  # noqa: PLC0415

        scenarios = with_arrivals(scenarios, _host(config).runner_config, note=_say_arrivals)
    collector = MatrixCollector.from_parent(session, name="crashmatrix", nodeid="crashmatrix",
                                            scenarios=scenarios)
    cases = list(collector.collect())
    collected: list[pytest.Item | pytest.Collector] = [*cases]
    # Reported as a collection, so the terminal counts them ("collected 38 items", not "collected
    # 0 items / 28 deselected / -28 selected" under -k): they are made after pytest's own collection.
    report = pytest.CollectReport(collector.nodeid, "passed", None, collected)
    session.ihook.pytest_collectreport(report=report)
    items.extend(cases)
