"""`durable-agent`: run, recover, send, cancel and show a durable agent session."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from crashmatrix.agent import inbox, probe
from crashmatrix.agent.lock import SessionLocked
from crashmatrix.agent.log import LogCorrupt, StorageFailed, read_commits, replace_file
from crashmatrix.agent.loop import Agent, AgentConfig
from crashmatrix.agent.provider import ProviderClient, ProviderConfig
from crashmatrix.agent.records import Outcome, Replay
from crashmatrix.agent.recovery import RecoveryError
from crashmatrix.agent.tools import BUILTINS, BashEnv, Registry, ToolSettings
from crashmatrix.agent.transcript import render

EXIT_OK = 0
EXIT_RUN_FAILED = 1
EXIT_USAGE = 2
EXIT_SESSION = 3
# Writing or syncing a commit failed (EIO, ENOSPC): the agent stopped; `recover` once the disk is
# healthy again.
EXIT_STORAGE = 4

# Settings a session remembers, so `recover` needs no flags after `run`.
_REMEMBERED = ("workspace", "provider_url", "model", "bash_env")


class UsageError(Exception):
    pass


def _add_common(p: argparse.ArgumentParser, *, top: bool) -> None:
    """Options accepted before or after the command; only the top level holds the defaults."""

    def d(value: Any) -> Any:
        return value if top else argparse.SUPPRESS

    p.add_argument("--session", type=Path,
                   default=d(None),
                   help="session directory (default $DURABLE_AGENT_SESSION or .durable-agent)")
    p.add_argument("--workspace", type=Path, default=d(None),
                   help="directory the tools work in (default: remembered, else cwd)")
    p.add_argument("--provider-url", default=d(None),
                   help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8080/v1 "
                        "(default: remembered, else $OPENAI_BASE_URL)")
    p.add_argument("--api-key-env", default=d("OPENAI_API_KEY"),
                   help="environment variable holding the API key")
    p.add_argument("--model", default=d(None), help="model name sent to the provider")
    p.add_argument("--provider-timeout", type=float, default=d(60.0), metavar="S")
    p.add_argument("--fsync", choices=["on", "off"], default=d("on"),
                   help="fsync every commit (off is faster and NOT crash-safe on power loss)")
    p.add_argument("--retry-delay", type=float, default=d(1.0), metavar="S")
    p.add_argument("--max-retries", type=int, default=d(3))
    p.add_argument("--resume-budget", type=int, default=d(3))
    p.add_argument("--max-steps", type=int, default=d(100), metavar="N",
                   help="model replies a run may have (resumed runs included) before it is "
                        "ended as failed (default 100)")
    p.add_argument("--bash-env", choices=[e.value for e in BashEnv], default=d(None),
                   help="environment of bash commands: inherit (all of the agent's, API keys "
                        "included) or clean (PATH, LANG, LC_ALL, HOME and TMPDIR only); default: "
                        "remembered, else inherit")
    p.add_argument("--tools", default=d(None), help="comma-separated tools to register (default: all)")
    p.add_argument("--policy", action="append", default=d([]), metavar="TOOL=safe|never",
                   help="override a tool's replay policy (repeatable)")


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    _add_common(common, top=False)

    parser = argparse.ArgumentParser(prog="durable-agent", description=__doc__)
    _add_common(parser, top=True)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", parents=[common], help="recover, then run TASK as a new run")
    run.add_argument("task")
    sub.add_parser("recover", parents=[common],
                   help="repair an interrupted run and drive its continuation to the end")
    send = sub.add_parser("send", parents=[common], help="queue an input for the running agent")
    send.add_argument("text")
    sub.add_parser("cancel", parents=[common], help="ask the running agent to cancel its run")
    show = sub.add_parser("show", parents=[common], help="print the session as a transcript")
    show.add_argument("--json", action="store_true", help="print the raw commits as JSON lines")
    sub.add_parser("tools", parents=[common], help="list tools and their replay policies")
    return parser


class SessionDamaged(RuntimeError):
    """A file of the session store is not what the agent wrote (exit 3, nothing changed)."""


def _saved_settings(path: Path) -> dict[str, Any]:
    """The remembered settings, checked: a damaged file is refused, never half-used."""
    if not path.exists():
        return {}
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise SessionDamaged(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(saved, dict):
        raise SessionDamaged(f"{path}: expected a JSON object, found {type(saved).__name__}")
    for key in _REMEMBERED:
        if key in saved and not isinstance(saved[key], str):
            raise SessionDamaged(f"{path}: field {key!r} must be a string")
    return saved


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    saved = _saved_settings(args.session / "config.json")
    chosen = {
        "workspace": str(args.workspace) if args.workspace else saved.get("workspace", os.getcwd()),
        "provider_url": args.provider_url or saved.get("provider_url")
        or os.environ.get("OPENAI_BASE_URL"),
        "model": args.model or saved.get("model") or "crashmatrix-agent",
        "bash_env": args.bash_env or saved.get("bash_env") or BashEnv.INHERIT.value,
    }
    if chosen["bash_env"] not in {e.value for e in BashEnv}:
        raise SessionDamaged(f"{args.session / 'config.json'}: field 'bash_env' must be one of "
                             f"{', '.join(e.value for e in BashEnv)}")
    return chosen


def _remember(args: argparse.Namespace, chosen: dict[str, Any]) -> None:
    """Save a run's settings for later `recover`s; called only with the session lock held, so a
    refused `run` on a locked session changes nothing the holder relies on."""
    path = args.session / "config.json"
    saved = _saved_settings(path)
    if {k: saved.get(k) for k in _REMEMBERED} != chosen:
        # Synced (with --fsync on) like a commit: a `recover` after a power loss reads these
        # settings, and a config.json renamed into place but never synced is gone with the power.
        replace_file(path, json.dumps(chosen, indent=2).encode(), fsync=args.fsync == "on")


def _registry(args: argparse.Namespace, bash_env: str = BashEnv.INHERIT.value) -> Registry:
    policies: dict[str, Replay] = {}
    for item in args.policy:
        name, _, value = item.partition("=")
        try:
            policies[name] = Replay(value)
        except ValueError:
            raise UsageError(f"--policy {item!r}: expected TOOL=safe or TOOL=never") from None
    enabled = [t.strip() for t in args.tools.split(",") if t.strip()] if args.tools else None
    try:
        return Registry.build(enabled, policies, settings=ToolSettings(bash_env=BashEnv(bash_env)))
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _agent(args: argparse.Namespace, settings: dict[str, Any]) -> Agent:
    workspace = Path(settings["workspace"])
    if not workspace.is_dir():
        raise UsageError(f"workspace {workspace} is not a directory")
    provider = None
    if settings["provider_url"]:
        try:
            provider = ProviderClient(ProviderConfig(
                base_url=settings["provider_url"],
                api_key=os.environ.get(args.api_key_env, ""),
                model=settings["model"],
                timeout_s=args.provider_timeout,
            ))
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    config = AgentConfig(
        session_dir=args.session,
        workspace=workspace,
        fsync=args.fsync == "on",
        retry_delay_s=args.retry_delay,
        max_retries=args.max_retries,
        resume_budget=args.resume_budget,
        max_steps=args.max_steps,
    )
    return Agent(config, _registry(args, settings["bash_env"]), provider)


def _exit_for(outcome: str | None) -> int:
    if outcome in (None, Outcome.COMPLETED, Outcome.CANCELLED, Outcome.STOPPED):
        return EXIT_OK
    return EXIT_RUN_FAILED


def _show(args: argparse.Namespace) -> int:
    log = args.session / "session.jsonl"
    if not log.exists():
        # "0 commits" would read as an empty session; a mistyped --session is the likelier cause.
        raise SessionDamaged(f"no session at {args.session} ({log.name} does not exist)")
    commits, repair = read_commits(log)
    if args.json:
        for c in commits:
            print(json.dumps({"seq": c.seq, "entries": c.entries}, ensure_ascii=False))
    else:
        print(f"session {args.session}: {len(commits)} commits")
        for line in render(commits):
            print(line)
    if repair is not None:
        print(f"note: line {repair.line} is torn ({repair.why}); the next open will drop it",
              file=sys.stderr)
    return EXIT_OK


# Built once at import: building it costs more than a whole recovery (argparse looks up message
# translations for every option), and a forked incarnation then inherits it ready-made.
_PARSER = _parser()


def _warm() -> None:
    """Parse typical command lines once at import.

    argparse compiles its matching patterns on first use (into `re`'s cache); paid here, a
    process forked after import (the crash harness's zygote forks one per incarnation) starts
    with them compiled instead of paying ~5 ms per start.
    """
    common = ["--session", "s", "--workspace", "w", "--provider-url", "http://127.0.0.1:1/v1",
              "--fsync", "off", "--retry-delay", "0.1", "--max-retries", "1",
              "--resume-budget", "1", "--provider-timeout", "1.0", "--tools", "read",
              "--policy", "read=safe"]
    try:
        _PARSER.parse_args([*common, "recover"])
        _PARSER.parse_args([*common, "run", "task"])
    except SystemExit:
        raise RuntimeError("crashmatrix.agent.cli._warm: its sample command lines no longer parse; "
                           "update them with the options") from None


_warm()


def main(argv: list[str] | None = None) -> int:
    args = _PARSER.parse_args(argv)
    if args.session is None:  # resolved per call: the environment is the caller's, not import time's
        args.session = Path(os.environ.get("DURABLE_AGENT_SESSION", ".durable-agent"))
    probe.attach_from_env()
    try:
        if args.command == "show":
            return _show(args)
        if args.command == "tools":
            for name, tool in _registry(args).tools.items():
                print(f"{name:12} replay={tool.replay.value:6} {BUILTINS[name].description}")
            return EXIT_OK
        if args.command == "send":
            item = inbox.deliver(args.session / "inbox", inbox.InboxKind.INPUT, args.text)
            print(f"queued input {item}")
            return EXIT_OK
        if args.command == "cancel":
            item = inbox.deliver(args.session / "inbox", inbox.InboxKind.CANCEL)
            print(f"cancel requested ({item})")
            return EXIT_OK
        settings = _settings(args)
        with _agent(args, settings) as agent:
            if args.command == "run":
                _remember(args, settings)  # the lock is held now
            if agent.log.repair is not None:
                r = agent.log.repair
                print(f"durable-agent: repaired torn tail: dropped line {r.line} "
                      f"({r.dropped_bytes} bytes: {r.why})", file=sys.stderr)
            outcome = agent.run_prompt(args.task) if args.command == "run" else agent.recover()
            for line in agent.notices_since_start():
                print(f"durable-agent: notice: {line}", file=sys.stderr)
        print(f"durable-agent: {outcome or 'nothing to recover'}", file=sys.stderr)
        return _exit_for(outcome)
    except UsageError as exc:
        print(f"durable-agent: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (SessionLocked, LogCorrupt, RecoveryError, SessionDamaged) as exc:
        print(f"durable-agent: error: {exc}", file=sys.stderr)
        return EXIT_SESSION
    except StorageFailed as exc:
        print(f"durable-agent: error: storage failed: {exc.strerror}; stopped (run `recover` once "
              "the disk is healthy)", file=sys.stderr)
        return EXIT_STORAGE
    except OSError as exc:
        # Every file the agent itself opens is the session store's (tools turn their own OS
        # errors into results; the provider client turns its into provider errors): a directory
        # where session.jsonl should be, a session path that is a file, an unreadable lock.
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"durable-agent: error: session store: {where}{exc.strerror or exc}",
              file=sys.stderr)
        return EXIT_SESSION
    except probe.ProbeDetached as exc:
        print(f"durable-agent: {exc}", file=sys.stderr)
        return EXIT_SESSION
