"""The harness side of the zygote: ask it to fork incarnations, learn their pids and exit codes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from crashmatrix.harness.execution.spawn import Launch, Process, SpawnMode, output_fd
from crashmatrix.harness.execution.zygote_server import MEASURE_IMPORTS
from crashmatrix.harness.records.agent_env import agent_environment


class ZygoteError(RuntimeError):
    pass


class ForkedProcess:
    """A child of the zygote, as the harness sees it: a pid, and an exit code when it is reaped."""

    def __init__(self, pid: int) -> None:
        self._pid = pid
        self._done = threading.Event()
        self._code: int | None = None

    @property
    def pid(self) -> int:
        return self._pid

    def _exited(self, code: int) -> None:
        self._code = code
        self._done.set()

    def poll(self) -> int | None:
        return self._code if self._done.is_set() else None

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired(f"zygote child {self._pid}", timeout or 0.0)
        assert self._code is not None
        return self._code


class Zygote:
    """The zygote process and the channel to it.

    Start it from a thread that lives as long as it is used (a command's main thread): the
    zygote dies when the thread that started it ends (the kernel's parent-death signal).
    """

    mode = SpawnMode.FORK

    def __init__(self, preload: list[str], measure_imports: tuple[Path, str] | None = None) -> None:
        """`measure_imports`: (data file, source package) to save the coverage of importing
        `preload` to (--line-coverage); the children's own data comes from `Launch.coverage`."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock = ours
        # Allow-listed as every incarnation's (a forked child's /proc/PID/environ is the
        # zygote's): no secret of the harness's reaches the agent this way either.
        env = agent_environment(os.environ)
        if measure_imports is not None:
            env[MEASURE_IMPORTS] = json.dumps([str(measure_imports[0]), measure_imports[1]])
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "crashmatrix.harness.execution.zygote_server", str(theirs.fileno()),
             str(os.getpid()), *preload],
            pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, env=env,
        )
        theirs.close()
        ready = self._sock.recv(4096)
        if not ready:
            self._sock.close()  # no channel to keep: the zygote is gone
            raise ZygoteError(f"the zygote exited before it was ready (exit {self._proc.wait()})")
        self._lock = threading.Lock()
        self._next_id = 0
        self._replies: dict[int, Any] = {}
        self._reply_ready = threading.Condition(self._lock)
        self._children: dict[int, ForkedProcess] = {}
        self._early_exits: dict[int, int] = {}
        self._closed = False
        self._reader = threading.Thread(target=self._read, name="zygote-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                msg = self._sock.recv(65536)
            except OSError:
                msg = b""
            if not msg:
                with self._lock:
                    self._closed = True
                    self._reply_ready.notify_all()
                    # The zygote is gone, so the kernel killed its children (their parent-death
                    # signal): no exit report will come, and no wait may last until a deadline.
                    for killed in self._children.values():
                        killed._exited(-signal.SIGKILL)
                    self._children.clear()
                return
            data = json.loads(msg)
            with self._lock:
                if "exit" in data:
                    child = self._children.pop(data["exit"], None)
                    if child is None:
                        self._early_exits[data["exit"]] = data["code"]
                    else:
                        child._exited(data["code"])
                else:
                    self._replies[data["id"]] = data
                    self._reply_ready.notify_all()

    def spawn(self, launch: Launch, probe_fds: tuple[int, int]) -> Process:
        if launch.entry is None:
            raise ZygoteError(f"{launch.program[0]}: no Python entry point to fork; use fresh spawning")
        out = output_fd(launch)
        if out is None:
            out = os.open(os.devnull, os.O_WRONLY)
        try:
            with self._lock:
                self._next_id += 1
                request_id = self._next_id
                request = {"id": request_id, "argv0": launch.program[-1], "entry": launch.entry,
                           "args": launch.args, "cwd": str(launch.cwd), "env": launch.env,
                           "coverage": [str(launch.coverage[0]), launch.coverage[1]]
                           if launch.coverage else None, "probes": launch.probes}
                socket.send_fds(self._sock, [json.dumps(request).encode()], [*probe_fds, out])
                while request_id not in self._replies:
                    if self._closed:
                        raise ZygoteError("the zygote died")
                    self._reply_ready.wait()
                pid = int(self._replies.pop(request_id)["pid"])
                child = ForkedProcess(pid)
                if pid in self._early_exits:
                    child._exited(self._early_exits.pop(pid))
                else:
                    self._children[pid] = child
                return child
        finally:
            os.close(out)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._reader.join(timeout=5)
