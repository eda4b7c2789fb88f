"""Runs one case: incarnations under the crash schedule, inbox deliveries, kills, and the settle run.

After the schedule's last crash, one `recover` runs to its end under the case's deadline. Then a
*settle* incarnation runs `recover` once more: a finished session must stay finished, so it must
make no request and run no effect; the verifier checks that on every case, for free. A settle
step (`fNN`, `--syscalls`) crashes that settle instead, and one more settles (`Case.step_of`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import secrets
import shlex
import sys
import threading
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from crashmatrix.fakes.case import CaseState
from crashmatrix.harness.adapters.interface import Adapter, Capability, LaunchSpec, pass_env_of
from crashmatrix.harness.adapters.requirements import Unsupported, unmet
from crashmatrix.harness.execution import case_services, permits, syscall_points
from crashmatrix.harness.execution.call_steps import killed_at_event, read_trace, tracing_for
from crashmatrix.harness.execution.case_services import DownstreamHost
from crashmatrix.harness.execution.case_start import Capture, Start
from crashmatrix.harness.execution.freeze_chain import FreezeChain
from crashmatrix.harness.execution.freezer import Freezer
from crashmatrix.harness.execution.incarnation import (
    Incarnation,
    IncarnationProtocolError,
    IncarnationRunaway,
    IncarnationTimeout,
)
from crashmatrix.harness.execution.incarnation_command import command_for
from crashmatrix.harness.execution.orphans import CASE_ENV, end_orphans
from crashmatrix.harness.execution.output_cap import output_end
from crashmatrix.harness.execution.scratch_watch import low_note, tree_bytes, watch
from crashmatrix.harness.execution.session_files import count_commits, holds_bytes
from crashmatrix.harness.execution.spawn import Launch, Spawner
from crashmatrix.harness.execution.states import Settled, key, settle_key
from crashmatrix.harness.execution.stop_signals import CaseAborted
from crashmatrix.harness.execution.trees import remove_tree
from crashmatrix.harness.execution.workspace_files import snapshot
from crashmatrix.harness.faults.interface import (
    AtCrash,
    FaultKind,
    at_crash_of,
    at_request,
)
from crashmatrix.harness.faults.registry import fault_named
from crashmatrix.harness.records.agent_env import agent_environment
from crashmatrix.harness.records.case import Case
from crashmatrix.harness.records.observation import (
    Delivery,
    IncarnationRecord,
    Intrusion,
    Observation,
    Request,
)
from crashmatrix.harness.records.results import DEFAULT_MAX_EVENTS, DEFAULT_TIMEOUT_S
from crashmatrix.harness.records.transcript import Transcript
from crashmatrix.scenarios.model import Scenario


class ProviderHost(Protocol):
    """The fake provider as the runner uses it (fakes.FakeProvider)."""

    def register(self, case_key: str, scenario: Scenario, state: CaseState | None = None) -> str: ...

    def state(self, case_key: str) -> CaseState: ...

    def requests(self, case_key: str) -> list[Any]: ...

    def forget(self, case_key: str) -> None: ...


@dataclass(frozen=True)
class RunnerConfig:
    adapter: Adapter
    provider: ProviderHost
    work_root: Path
    case_timeout_s: float = DEFAULT_TIMEOUT_S
    max_events: int = DEFAULT_MAX_EVENTS  # per incarnation; more is a runaway, killed at once
    fsync: bool = False
    keep: bool = False
    settle: bool = True
    spawner: Spawner | None = None  # None: a fresh interpreter per incarnation
    # With --line-coverage: recovery incarnations save coverage data of this package here.
    coverage_dir: Path | None = None
    coverage_source: str = "crashmatrix.agent"
    # How the agent was named (`--agent`), recorded in results so repro and report can find the
    # adapter again: a registered name, mutant:NAME or module:attr. None: the adapter's name.
    agent_ref: str | None = None
    # Black-box mode (`--black-box`): the agent runs without probes, and the recording's first
    # incarnation is traced for its store calls (the crash points). A case whose schedule has a
    # black-box step runs without probes whatever this says (`repro` of such a case).
    blackbox: bool = False
    # Serves the scenarios' downstream services (`[[services]]`); None: a scenario that declares
    # one cannot run (a harness error says so).
    downstream: DownstreamHost | None = None
    # System-call crash points with probes on (`--syscalls`): an incarnation a case may extend
    # from (the recording's first, a case's finishing one) is traced for its store calls.
    syscalls: bool = False

    @property
    def agent(self) -> str:
        return self.agent_ref or self.adapter.name


def case_dir_name(case: Case, salt: str = "") -> str:
    """`<scenario>-<12 hex digits>`: every case directory's name is as long (`states.restore`
    rewrites one into another byte for byte); `salt` names another for the same case."""
    digest = hashlib.sha1(f"{salt}{case.case_id}".encode()).hexdigest()[:12]
    return f"{case.scenario}-{digest}"


def request_of(index: int, raw: Any) -> Request:
    """The verifier's view of request `index` of the fake's log."""
    # Attributes are read directly: a deep copy of every request (dataclasses.asdict) was a
    # fifth of the harness's CPU time per case.
    def get(key: str) -> Any:
        return raw.get(key) if isinstance(raw, dict) else getattr(raw, key, None)

    body = get("error") or {}
    error = body.get("error") if isinstance(body, dict) else None
    return Request(index=index, messages=list(get("messages") or []),
                   status=int(get("status") or 0), fault=get("fault"),
                   error_type=error.get("type") if isinstance(error, dict) else None,
                   reply=get("reply"), rule=get("rule"), wire=get("wire") or "chat",
                   pairing=bool(get("pairing")))


class CaseRunner:
    def __init__(self, config: RunnerConfig, stop: threading.Event | None = None) -> None:
        self.config = config
        self.stop = stop or threading.Event()
        self._base_env: dict[str, str] | None = None  # the incarnations' environment, built once
        self._faults: dict[str, FaultKind] = {}  # looked up in the registry once per name

    def _check_supported(self, case: Case, scenario: Scenario) -> None:
        """The last guard (commands check first): never give an agent what it cannot take."""
        problems = unmet(self.config.adapter, [scenario])
        if scenario.services and self.config.downstream is None:
            problems.append(f"scenario {scenario.name!r} declares downstream services, and this "
                            "runner has no fake downstream to serve them")
        for step in case.schedule:
            if step.downstream:
                problems += case_services.step_problems(step, self.fault(step.fault), scenario)
            lacking = self.fault(step.fault).requires - self.config.adapter.capabilities
            if lacking:
                problems.append(f"fault {step.fault!r} needs {', '.join(sorted(lacking))}, which agent "
                                f"{self.config.adapter.name!r} does not declare")
        if problems:
            raise Unsupported("; ".join(problems))

    def fault(self, name: str) -> FaultKind:
        if name not in self._faults:
            self._faults[name] = fault_named(name)
        return self._faults[name]

    def run(self, case: Case, scenario: Scenario, start: Start | None = None,
            capture: Capture | None = None, settled: Settled | None = None,
            chain: FreezeChain | None = None, trace_finisher: bool = False,
            slot: AbstractContextManager[object] | None = None) -> Observation:
        """Run the case: from scratch, or (`start`) from a crash state, its earlier incarnations
        given; `capture`: snapshot the tree at every event of one incarnation; `settled`: settle
        runs already made from a byte-identical final state, reused; `chain`: the case is a host,
        frozen at each of the chain's points in turn (`--states`, freeze_chain.py); `trace_finisher`:
        trace the incarnation that finishes the work for its store calls (`--syscalls`: the
        system-call points a deeper case may crash at); `slot`: held while its agents run (the
        matrix's jobs; let go however the case ends)."""
        with contextlib.ExitStack() as held:
            return self._run(case, scenario, start, capture, settled, chain, trace_finisher, slot, held)

    def _run(self, case: Case, scenario: Scenario, start: Start | None, capture: Capture | None,
             settled: Settled | None, chain: FreezeChain | None, trace_finisher: bool,
             slot: AbstractContextManager[object] | None, held: contextlib.ExitStack) -> Observation:
        cfg = self.config
        self._check_supported(case, scenario)
        began = time.monotonic()
        # Restored from a snapshot, its fault applied, by the caller (crash_states), or made here.
        case_dir = start.case_dir if start is not None else cfg.work_root / case_dir_name(case)
        workspace, session = case_dir / "ws", case_dir / "session"
        if start is None:
            remove_tree(case_dir)
            workspace.mkdir(parents=True)
            for rel, text in scenario.workspace.items():
                target = workspace / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
            before = snapshot(workspace)
        else:
            before = start.workspace_before
        if capture is not None:
            capture.workspace_before = before
        # The case's URL path on the fakes: its directory's name (readable in logs) and a secret.
        # The name alone is predictable (a hash of the case id): any local process that found the
        # port could answer, or mislead, another case's agent; with 64 random bits it cannot.
        case_key = f"{case_dir.name}-{secrets.token_hex(8)}"
        services = case_services.register(cfg.downstream, case_key, scenario)
        url = cfg.provider.register(case_key, scenario, None if start is None else start.provider)
        incarnations: list[IncarnationRecord] = [] if start is None else list(start.prefix)
        deliveries: list[Delivery] = [] if start is None else list(start.deliveries)
        intrusions: list[Intrusion] = []
        harness_error: str | None = None
        accepted = False if start is None else start.accepted
        probes = not (cfg.blackbox or case.blackbox)
        base = dataclasses.replace(self.spec_for(case_dir, scenario), provider_url=url, services=services)
        # A job slot for its agents' run (the case's deadline counts from it); what comes after
        # (reading the workspace, judging) overlaps another case's agents.
        if slot is not None:
            held.enter_context(slot)
        deadline = time.monotonic() + cfg.case_timeout_s
        try:
            index = len(incarnations) + 1
            while True:
                if self.stop.is_set():
                    raise CaseAborted(case.case_id)
                restart = index > 1
                # A crash before the task was accepted (no run in the store) leaves nothing to
                # recover: the caller's `run` failed, and a caller retries it. Anything later
                # must be recovered, never re-submitted.
                # Once accepted, always: the store is only read until the task is in it.
                accepted = accepted or (restart and self.accepted(base, incarnations, probes))
                spec, args, policies = command_for(cfg.adapter, base, scenario, accepted)
                sent = case_services.count(cfg.downstream, case_key, services)
                record = IncarnationRecord(index, "recover" if accepted else "run", policies,
                                           requests_before=len(cfg.provider.requests(case_key)),
                                           commits_before=count_commits(session / "session.jsonl"),
                                           downstream_before=sent)
                record.settle = index == case.depth + 2
                incarnations.append(record)
                step = case.step_of(index)
                cover = None
                if accepted and cfg.coverage_dir is not None:
                    data = cfg.coverage_dir / f".coverage.{case_key}.{index}"
                    cover = (data, cfg.coverage_source)
                freezer = Freezer(self, cfg.adapter, lambda: len(cfg.provider.requests(case_key)), base,
                                  scenario, case_key, case_dir, deliveries, deadline, accepted,
                                  incarnations, intrusions, shlex.join([*cfg.adapter.program, *args]))
                # Black-box: the recording's first incarnation is traced for its store calls;
                # --syscalls: the finishing one and the settle, probes on, of a case that may be
                # extended (its settle's calls are its own settle steps: never a reused settle).
                record_calls = ((not probes and case.depth == 0 and index == 1)
                                or (trace_finisher and probes and index in (case.depth + 1, case.depth + 2)))
                snap = capture if capture is not None and capture.incarnation == index else None
                if snap is not None:
                    snap.live = record
                final_key = None
                settle_args: list[str] = []
                # A settle traced for its points runs whatever an equal final state settled
                # before: its calls are this case's settle steps (it may still be kept).
                if record.settle and settled is not None and not record_calls:
                    # The case's URL on the fakes holds random bits of its own (issue 33, S4): in
                    # the key it stands as the directory's name, which the key masks, so two cases
                    # that end in the same state share a settle run.
                    settle_args = [a.replace(case_key, case_dir.name) for a in args]
                    # The same final state settled before: its settle run is this one's.
                    final_key = settle_key(case_dir, cfg.provider.state(case_key), scenario.name,
                                           "settle", settle_args)
                    if settled.reuse(final_key, record):
                        if capture is not None:
                            capture.settle_unchanged = True
                        break
                self.run_incarnation(args, spec, record, step, scenario, deliveries, deadline, case_dir,
                                     cover, freezer=freezer, probes=probes, record_calls=record_calls,
                                     capture=snap, case_key=case_key, chain=chain)
                if final_key is not None and settled is not None:
                    # Kept only when it changed nothing (no byte, no request): then any case reaching
                    # this final state ends as this one did.
                    ended = cfg.provider.state(case_key)
                    unchanged = settle_key(case_dir, ended, scenario.name, "settle", settle_args) == final_key
                    if len(ended.records) == record.requests_before and unchanged:
                        settled.keep(final_key, record)
                        if capture is not None:
                            capture.settle_unchanged = True
                if record.timed_out or record.nondeterministic or record.runaway or record.protocol_error:
                    break
                if chain is not None and chain.done:
                    break  # a host whose every intruder was clean: its run is its parent's
                # Incarnations 1..depth crash; depth+1 finishes the work; depth+2 settles (with a
                # settle step: depth finishes, depth+1 is the settle crashed, depth+2 settles).
                if step is None and (index > case.depth + 1 or (not cfg.settle and not case.crashes_settle)):
                    break
                index += 1
        except OSError as exc:
            harness_error = f"{exc.__class__.__name__}: {exc}"
        finally:
            # What its agents left running (a daemon) ends with the case, not with the command.
            end_orphans(os.fspath(case_dir))
            raw_requests = cfg.provider.requests(case_key)
            cfg.provider.forget(case_key)
            downstream = case_services.collect(cfg.downstream, case_key, services, incarnations)
        if self.stop.is_set():
            remove_tree(case_dir)
            raise CaseAborted(case.case_id)
        has_store = Capability.STORE in cfg.adapter.capabilities
        # An adapter may read its store with the agent's own program: still within the job.
        transcript = cfg.adapter.read_transcript(spec) if has_store else Transcript()
        held.close()
        after = snapshot(workspace)
        scratch_low = self._scratch_low(case, case_dir, began)
        if not cfg.keep:
            remove_tree(case_dir)
        return Observation(
            case=case,
            incarnations=incarnations,
            transcript=transcript,
            requests=[request_of(i, r) for i, r in enumerate(raw_requests)],
            workspace_before=before,
            workspace_after=after,
            deliveries=deliveries,
            resume_budget=scenario.agent.resume_budget,
            harness_error=harness_error,
            store_read=has_store,
            intrusions=intrusions,
            concurrent=Capability.CONCURRENT in cfg.adapter.capabilities,
            declared_not_applicable=dict(getattr(cfg.adapter, "not_applicable", {})),
            probes=probes,
            downstream=downstream,
            scratch_low=scratch_low,
        )

    def _scratch_low(self, case: Case, case_dir: Path, began: float) -> str | None:
        """Why this case's writes may have failed for want of space, when the shared scratch
        filesystem ran low while it ran (scratch_watch.py); its own tree's size beside it."""
        scratch = watch(os.fspath(self.config.work_root))
        low = scratch.lowest_since(began)
        if low is None:
            return None
        size = tree_bytes(os.fspath(case_dir))
        scratch.measured(case.case_id, size)
        return low_note(low, size)

    def spec_for(self, case_dir: Path, scenario: Scenario) -> LaunchSpec:
        """The spec of an incarnation in `case_dir`, before any restart policy applies (`command_for`),
        and with no provider (`run` adds the case's; a fault acting on files needs none)."""
        return LaunchSpec(session=case_dir / "session", workspace=case_dir / "ws", provider_url="",
                          tools=list(scenario.tools.enabled), policies={},
                          resume_budget=scenario.agent.resume_budget,
                          max_retries=scenario.agent.max_retries,
                          retry_delay_s=scenario.agent.retry_delay_s,
                          provider_timeout_s=scenario.agent.provider_timeout_s, fsync=self.config.fsync,
                          max_steps=scenario.agent.max_steps)

    def accepted(self, spec: LaunchSpec, incarnations: list[IncarnationRecord],
                  probes: bool = True) -> bool:
        """Whether the task is in the agent's store, so the next incarnation must recover it.

        From the store when the adapter reads it; otherwise from the probe trace: a commit whose
        write returned (`commit.written`, or `commit.after`) reached the store, and an agent's
        first commit holds its task (docs/your-agent.md, step 2). An acknowledged commit
        (`commit.after`) accepted the task whatever the store says now: a power loss may have
        taken it since, and the caller, told it was accepted, recovers it, never re-submits it.
        """
        decided = self.accepted_by_events(incarnations, probes)
        if decided is not None:
            return decided
        if Capability.STORE in self.config.adapter.capabilities:
            return bool(self.config.adapter.read_transcript(spec).runs)
        # Black-box, no store reader: no commit event says the task landed; a store file
        # holding bytes does (its first commit holds the task, as for any agent).
        return holds_bytes(spec.session)

    def accepted_by_events(self, incarnations: list[IncarnationRecord], probes: bool = True) -> bool | None:
        """`accepted` when the probe events alone decide it; None when the store must be read."""
        acknowledged = any(e.kind == "commit.after" for inc in incarnations for e in inc.events)
        if Capability.STORE in self.config.adapter.capabilities:
            return True if acknowledged else None
        if not probes:
            return None
        # A write that returned survives a SIGKILL: `commit.written` is enough.
        return any(e.kind in ("commit.written", "commit.after") for inc in incarnations for e in inc.events)

    def run_incarnation(self, args: list[str], spec: LaunchSpec, record: IncarnationRecord,
                        step: Any, scenario: Scenario, deliveries: list[Delivery],
                        deadline: float, case_dir: Path, cover: tuple[Path, str] | None, *,
                        freezer: Freezer | None = None, output: Path | None = None,
                        probes: bool = True, record_calls: bool = False, capture: Capture | None = None,
                        case_key: str | None = None, chain: FreezeChain | None = None) -> None:
        """Run one incarnation: to `step`'s crash point (and its fault), else to its end.
        `freezer`: how to hand a FREEZE fault the frozen incarnation (None: an intruder, which
        is never crashed and gets no deliveries). `probes` False: black-box, the agent is not
        attached; `record_calls`: trace it and keep its store calls (a black-box recording)."""
        env = {**self._env(), **(spec.services or {}), CASE_ENV: os.fspath(case_dir)}
        # A system-call point's count is the main thread's: no incarnation of the case may cache
        # bytecode a later traced one would then not write or open (syscall_points.py).
        if self.config.syscalls or (step is not None and step.syscall):
            env.update(syscall_points.NO_BYTECODE)
        started = time.monotonic()
        adapter = self.config.adapter
        # A downstream step names a request: the fake downstream acts there, not the probe loop.
        armed = None
        if step is not None and step.downstream and case_key is not None:
            request_fault = at_request(self.fault(step.fault))
            if request_fault is None:
                raise ValueError(f"fault {step.fault!r} does not act at downstream requests")
            armed = case_services.ArmedRequest(self.config.downstream, case_key, record, step,
                                               case_services.injection_of(request_fault))
            step = None
        trace = case_dir / f"inc{record.index}.strace"
        traced = tracing_for(step, self.fault, self.config.spawner, spec, trace, cover, record, record_calls)
        step = traced.step
        log = output or case_dir / f"inc{record.index}.log"
        launch = Launch(program=adapter.program, entry=adapter.python.entry if adapter.python else None,
                        args=args, cwd=case_dir, env=env, output=log, coverage=traced.cover, probes=probes)
        with Incarnation(launch, traced.spawner, self.config.max_events) as inc:
            if armed is not None:
                armed.attach(inc)
            try:
                # Most scenarios deliver nothing: then no event needs a delivery check. An
                # intruder delivers nothing: scenario items are for the session's own incarnations.
                pending = freezer is not None and permits.pending(scenario, deliveries)
                # Snapshots need the agent waiting at each event: one permit at a time, as for a delivery.
                permits.grant(inc, step, pending or capture is not None)
                while (event := inc.next_event(deadline)) is not None:
                    record.events.append(event)
                    if pending:
                        permits.deliver(adapter, event, spec, record.index, scenario, deliveries)
                        pending = permits.pending(scenario, deliveries)
                    # After the delivery: a kill at this event comes after it too (below).
                    if capture is not None and case_key is not None:
                        capture.take(case_dir, self.config.provider.state(case_key), record.index, event.n)
                    if step is not None and event.n == step.n:
                        if event.point != step.point:
                            record.nondeterministic = (
                                f"incarnation {record.index} event {event.n} was {event.point}, "
                                f"the recording listed {step.point}")
                        fault = self.fault(step.fault)
                        if (at_crash_of(fault) is AtCrash.FREEZE and freezer is not None
                                and not record.nondeterministic):
                            record.frozen_at = event.n
                            inc.freeze()
                            key_before = self._state_key(case_dir, case_key) if chain is not None else ""
                            try:
                                fault.while_frozen(freezer.frozen(inc, record))
                            finally:
                                inc.thaw()
                            step = None  # it was not crashed: it runs on to its end
                            if chain is not None:
                                after = self._state_key(case_dir, case_key)
                                step = chain.frozen(event.n, key_before, after, freezer.intrusions)
                                if chain.done:
                                    inc.kill()  # every point was clean: the rest is the parent's run
                                    record.crashed_at = event.n
                                    break
                            permits.grant(inc, step, pending or capture is not None)
                            continue
                        inc.kill()  # an observed one: strace has exited too, its trace complete
                        record.crashed_at = event.n
                        killed_at_event(traced, fault, adapter, self.config.fsync, step, record, spec)
                        break
                    permits.grant(inc, step, pending or capture is not None)
                else:
                    if step is not None:
                        record.nondeterministic = (
                            f"incarnation {record.index} ended after {len(record.events)} events, "
                            f"before the recorded crash point {step.n}:{step.point}")
                    record.exit_code = inc.wait(deadline)
                    read_trace(traced, self.fault, adapter, self.config.fsync, record, spec, record_calls,
                               probes, inc.event_fd)
            except IncarnationTimeout:
                record.timed_out = True
                inc.kill()
            except IncarnationRunaway as exc:
                record.runaway = exc.events
                inc.kill()
            except IncarnationProtocolError as exc:
                record.protocol_error = str(exc)
                inc.kill()
        if armed is not None:
            armed.settle(record)
        record.duration_ms = (time.monotonic() - started) * 1000
        if output is None:  # an intruder's output is its Intrusion's (intruder.py)
            # Read now, while the case tree exists: only the verdict says whether it is shown.
            record.output = output_end(log)

    def _state_key(self, case_dir: Path, case_key: str | None) -> str:
        state = self.config.provider.state(case_key) if case_key is not None else None
        return key(case_dir, state) if state is not None else ""

    def _env(self) -> dict[str, str]:
        if self._base_env is None:
            # Allow-listed: the agent never inherits the harness's keys (records/agent_env.py).
            env = agent_environment(os.environ, pass_env_of(self.config.adapter))
            # Scenario commands say `python`: make that the interpreter running the harness (it
            # has the project's dependencies, e.g. pytest), whether or not a venv is activated.
            env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
            env.update(self.config.adapter.env())
            self._base_env = env
        return self._base_env
