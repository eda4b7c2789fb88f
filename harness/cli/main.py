"""The `crashmatrix` command line: the click group and the `fake-provider` subcommand."""

from __future__ import annotations

import errno
import importlib
import sys
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, NoReturn

import click

from crashmatrix.fakes import FakeProvider
from crashmatrix.harness.cli.exitcodes import Exit, fail
from crashmatrix.harness.execution.netns import isolate
from crashmatrix.harness.execution.stop_signals import Interrupted, stop_signals_handled
from crashmatrix.harness.execution.subreaper import become_subreaper, end_leftovers
from crashmatrix.harness.execution.warm_zygotes import kept
from crashmatrix.harness.plugins import PluginError
from crashmatrix.scenarios import ScenarioError, resolve

# The case key the standalone server uses; the URL it prints ends in /<key>/v1.
STANDALONE_CASE = "default"


# The commands each loaded only when named (or listed, by --help or completion): a `run` or a
# `repro` does not pay for Hypothesis, the benchmark or the durability table (0.1 s of each start),
# and the matrix commands not for each other (`repro` and `list` skip run.py's run.json and report
# writers: about 30 ms of each start).
LAZY = {
    "baseline": ("crashmatrix.harness.cli.baseline_cmd", "baseline"),
    "bench": ("crashmatrix.harness.cli.bench", "bench"),
    "compare": ("crashmatrix.harness.cli.compare", "compare_cmd"),
    "durability": ("crashmatrix.harness.cli.durability", "durability"),
    "explore": ("crashmatrix.harness.cli.explore", "explore"),
    "list": ("crashmatrix.harness.cli.list_cmd", "list_"),
    "merge": ("crashmatrix.harness.cli.merge", "merge_"),
    "mutants": ("crashmatrix.harness.cli.mutants", "mutants"),
    "report": ("crashmatrix.harness.cli.report", "report"),
    "repro": ("crashmatrix.harness.cli.repro", "repro"),
    "run": ("crashmatrix.harness.cli.run", "run"),
    "schema": ("crashmatrix.harness.cli.schema", "schema"),
}


class _Main(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY and cmd_name not in self.commands:
            module, name = LAZY[cmd_name]
            self.add_command(getattr(importlib.import_module(module), name), cmd_name)
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            # kept(): an adapter's describe is forked from the zygote its run then takes.
            with _stop_signals_raise(), kept():
                return super().invoke(ctx)
        except PluginError as exc:
            # An installed plugin that cannot load is the user's setup to fix, not a crash.
            fail(f"{exc} (uninstall or fix the distribution that registers it)")
        except KeyboardInterrupt as exc:
            # Not click's "Aborted!" and exit 1: an interrupted command is exit 3 (README).
            fail(str(exc) or "interrupted by SIGINT", Exit.HARNESS)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise  # click's own: usage errors (2) and explicit exits
        except OSError as exc:
            if exc.errno not in OUT_OF_SPACE:
                _harness_failed(exc)
            # Not a bug: the machine's disk. What was written stays whole (results are written
            # a line at a time, run.json by rename), so the command can be run again.
            fail(f"{exc.filename or 'a file'}: {exc.strerror or 'no space left'}: the results "
                 "written so far are kept whole; free some space and run the command again "
                 "(`crashmatrix run --resume` continues the matrix where it stopped)", Exit.HARNESS)
        except Exception as exc:
            _harness_failed(exc)


# The disk (or the user's quota) is full: the machine's state, not a bug.
OUT_OF_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})


def _harness_failed(exc: Exception) -> NoReturn:
    # A harness bug must never read as a verdict: exit 1 means "violations found".
    # The traceback goes last, for a bug report; the first line says what happened.
    click.echo(f"crashmatrix: error: the harness failed ({type(exc).__name__}: {exc}); "
               "this is a crashmatrix bug: please report it with the command and the "
               "traceback below", err=True)
    click.echo(traceback.format_exc(), err=True)
    sys.exit(int(Exit.HARNESS))


@contextmanager
def _stop_signals_raise() -> Iterator[None]:
    """For a whole command, SIGINT and SIGTERM raise Interrupted (a KeyboardInterrupt).

    By default SIGTERM ends the process on the spot: no summary, the scratch tree left behind,
    agents running on. Raised, it unwinds the command like Ctrl-C: every `with` closes (agents
    killed, zygote closed, scratch tree removed), and the matrix turns both into a stop at a safe
    point while it runs.
    """

    def handler(signum: int, frame: FrameType | None) -> None:
        raise Interrupted(signum)

    with stop_signals_handled(handler):
        yield


@click.group(cls=_Main)
def main() -> None:
    """crashmatrix: crash-test durable agent loops"""


@contextmanager
def _until_signalled() -> Iterator[threading.Event]:
    """An event set by SIGINT or SIGTERM; the previous handlers come back afterwards."""
    done = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        done.set()

    with stop_signals_handled(handler):
        yield done


@main.command("fake-provider")
@click.option("--scenario", "name", required=True, metavar="NAME",
              help="Scenario whose script the provider follows.")
@click.option("--port", default=0, show_default=True, type=click.IntRange(0, 65535),
              help="Port on 127.0.0.1 (0: an ephemeral port).")
@click.option("--scenarios", "dirs", multiple=True, metavar="DIR",
              type=click.Path(file_okay=False), help="Also load scenarios from DIR (repeatable).")
def fake_provider(name: str, port: int, dirs: tuple[str, ...]) -> None:
    """Serve one scenario's scripted provider for any agent, until SIGINT or SIGTERM.

    Prints the OpenAI base URL (http://127.0.0.1:PORT/default/v1) on stdout; point the agent's
    provider URL at it. Faults in the scenario fire as scripted, counted from server start.
    """
    try:
        (scenario,) = resolve([name], dirs)
    except ScenarioError as exc:
        fail(str(exc))
        return
    provider = FakeProvider(port=port)
    try:
        provider.start()
    except OSError as exc:
        fail(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}")
        return
    try:
        with _until_signalled() as done:
            url = provider.register(STANDALONE_CASE, scenario)
            click.echo(url)
            sys.stdout.flush()
            click.echo(f"serving scenario {scenario.name!r} at {url}; Ctrl-C to stop", err=True)
            # wait() with a timeout keeps the main thread responsive to signals.
            while not done.wait(0.5):
                pass
    finally:
        provider.stop()


# Commands that start no agent keep the machine's network: `fake-provider` serves agents outside.
OPEN_NETWORK = frozenset({"fake-provider", "report", "merge", "schema", "baseline"})


def entry() -> None:
    """The `crashmatrix` process: `main`, in a network namespace of its own (agents reach only
    the fakes: harness/execution/netns.py), as a child subreaper (harness/execution/subreaper.py),
    so that whatever an agent left running ends with the command; each says so when it matters."""
    command = next((a for a in sys.argv[1:] if not a.startswith("-")), None)
    if command is not None and command not in OPEN_NETWORK:
        why = isolate()  # first: no thread may have started yet
        if why is not None:
            click.echo(f"crashmatrix: note: agents are not network-isolated: {why}; they can "
                       "reach whatever this machine can, real endpoints with real keys included",
                       err=True)
    adopting = become_subreaper()
    try:
        main()
    finally:
        if adopting:
            left = end_leftovers()
            if left:
                click.echo(f"crashmatrix: note: {left} process(es) an agent left running (a daemon "
                           "outliving its case) were killed as the command ended", err=True)
