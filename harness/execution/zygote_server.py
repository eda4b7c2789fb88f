"""The zygote process: imports the agent once, then forks one child per incarnation.

Started as `python -m crashmatrix.harness.execution.zygote_server FD HARNESS_PID MODULE...` with
FD one end of a SOCK_SEQPACKET socketpair. It is single-threaded and forks before any thread could
exist, so each child is a clean copy. Requests arrive with the child's probe pipe and output file
as passed descriptors; the reply names the child's pid; the zygote reaps every child and reports
its exit code. It dies with the harness, and its children die with it (`die_with_parent`).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import selectors
import signal
import socket
import sys
import traceback
from typing import Any

from crashmatrix.harness.execution.spawn import die_with_parent

MAX_MESSAGE = 1 << 20
# Set (to JSON ["DATA_FILE", "SOURCE"]) when the preloaded modules' import-time lines are to be measured
# by coverage.py (--line-coverage); removed before any child can inherit it.
MEASURE_IMPORTS = "CRASHMATRIX_MEASURE_IMPORTS"


def _child(request: dict[str, Any], fds: list[int], keep_closed: list[int], zygote: int) -> None:
    """Runs in the forked child; never returns."""
    code = 70
    try:
        die_with_parent(zygote)
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL if sig != signal.SIGPIPE else signal.SIG_IGN)
        for fd in keep_closed:
            with contextlib.suppress(OSError):
                os.close(fd)
        os.setsid()
        probe_r, probe_w, out = fds
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(devnull)
        os.close(out)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        # As a fresh interpreter would read it at start: a forked child caches no bytecode either
        # when told not to (`--syscalls` counts the calls of its traced incarnations).
        told = os.environ.get("PYTHONDONTWRITEBYTECODE")
        sys.dont_write_bytecode = bool(told or sys.flags.dont_write_bytecode)
        if request.get("probes", True):
            os.environ["CRASHMATRIX_PROBE"] = f"fd:{probe_r},{probe_w}"
        else:  # black-box: the channel stays open (its end of file is the agent's end), unnamed
            os.environ.pop("CRASHMATRIX_PROBE", None)
        module_name, _, func = request["entry"].partition(":")
        sys.argv = [request["argv0"], *request["args"]]
        if request.get("coverage"):
            from crashmatrix.harness.execution.covered import run  # noqa: PLC0415 - only with --line-coverage

            data_file, source = request["coverage"]
            code = run(data_file, source, request["entry"], list(request["args"]))
        else:
            entry = getattr(importlib.import_module(module_name), func)
            code = int(entry(list(request["args"])) or 0)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def serve(sock: socket.socket) -> None:
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    # SIGINT at the terminal, and a SIGTERM sent to the whole group, reach the zygote too; the
    # harness decides what happens to its children, and the zygote ends when the harness closes
    # the socket (or dies: then the kernel kills it).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    me = os.getpid()
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ)
    sel.register(wake_r, selectors.EVENT_READ)
    while True:
        for key, _ in sel.select():
            if key.fileobj is sock:
                msg, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, 3)
                if not msg:
                    return
                request = json.loads(msg)
                pid = os.fork()
                if pid == 0:
                    _child(request, fds, [sock.fileno(), wake_r, wake_w], me)
                for fd in fds:
                    os.close(fd)
                sock.send(json.dumps({"id": request["id"], "pid": pid}).encode())
            else:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 4096)
                while True:
                    try:
                        pid, status = os.waitpid(-1, os.WNOHANG)
                    except ChildProcessError:
                        break
                    if pid == 0:
                        break
                    code = os.waitstatus_to_exitcode(status)
                    sock.send(json.dumps({"exit": pid, "code": code}).encode())


def main() -> None:
    fd, harness = int(sys.argv[1]), int(sys.argv[2])
    die_with_parent(harness)
    measured = os.environ.pop(MEASURE_IMPORTS, None)
    if measured:  # --line-coverage: ["DATA_FILE", "SOURCE"]
        from crashmatrix.harness.execution.covered import measure_imports  # noqa: PLC0415 - only then

        data_file, source = json.loads(measured)
        measure_imports(data_file, source, sys.argv[3:])
    for module in sys.argv[3:]:
        importlib.import_module(module)
    # Move everything imported so far out of the collector's reach: a child's first collection
    # would otherwise touch (and so copy) every page the zygote shares with it.
    gc.collect()
    gc.freeze()
    sock = socket.socket(fileno=fd)
    sock.send(b'{"ready": true}')
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        serve(sock)


if __name__ == "__main__":
    main()
