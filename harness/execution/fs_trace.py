"""Observing an incarnation's file-system calls with strace: its command line, its output parsed.

Why strace, not an LD_PRELOAD shim or a seccomp tracer of our own: it sees the system calls
themselves, whatever made them. A shim interposes on libc's wrappers only, so it misses a
statically linked agent, a runtime that issues system calls directly (Go; Node's libuv calls
libc for file I/O, but its io_uring backend does not go through `write` at all), and a child the
agent starts without inheriting the environment. A seccomp user-notification tracer would be
exact too, but it is a supervisor process, a filter and an fd-passing protocol of our own; strace
is one Debian package (`apt-get install strace`) and `--seccomp-bpf` makes the calls it does not
trace cost nothing. Its cost per incarnation is what `crashmatrix bench --trace` measures.

Parsing is pure (text in, records out) and tested on captured output (tests/support/strace).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable
from pathlib import Path

from crashmatrix.harness.execution.fs_inject import INJECTED_MARK
from crashmatrix.harness.records.fs_calls import FsCall, Syscall

# What is traced: every call that changes a file's bytes, name or durability, plus `lseek` (the
# offset a plain write lands at) and `close`.
TRACED = tuple(s.value for s in Syscall)
INSTALL_HINT = "install strace (Debian, Ubuntu: apt-get install strace; Fedora: dnf install strace)"


class TracerMissing(RuntimeError):
    """No strace on PATH: a fault that observes file-system calls cannot run (exit 3)."""


def strace_path() -> str:
    found = shutil.which("strace")
    if found is None:
        raise TracerMissing(f"file-system calls are observed with strace, which is not on PATH; "
                            f"{INSTALL_HINT}")
    return found


def strace_argv(strace: str, output: Path, *, seccomp: bool = True, follow: bool = True) -> list[str]:
    """strace following forks (-f; not when `follow` is False: the main thread alone, whose calls
    a system-call point counts), quiet (-qq), fds shown with their paths (-y), untraced calls
    left to run at full speed (--seccomp-bpf, unless `seccomp` is False: strace 6.1 delivers no
    injected signal at a call it stops at through seccomp), to `output`. The program follows `--`."""
    fast = ["--seccomp-bpf"] if seccomp else []
    forks = ["-f"] if follow else []
    return [strace, *forks, "-qq", "-y", *fast, "-e", f"trace={','.join(TRACED)}", "-o", str(output)]


# `1234  name(args) = result`, the pid column present with -f; `<unfinished ...>` and
# `<... name resumed>` split one call of a process that another traced process interrupted.
_LINE = re.compile(r"^(?:(?P<pid>\d+)\s+)?(?P<rest>.*)$")
_CALL = re.compile(r"^(?P<name>\w+)\((?P<args>.*)$")
_RESUMED = re.compile(r"^<\.\.\. (?P<name>\w+) resumed>(?P<args>.*)$")
_UNFINISHED = " <unfinished ...>"
_RESULT = re.compile(r"^(?P<head>.*)\)\s+=\s+(?P<result>.*)$")
_FD = re.compile(r"^(?P<fd>-?\d+|AT_FDCWD)(?:<(?P<path>.*)>)?$")
_ERRNO = re.compile(r"^-1 (?P<errno>E[A-Z0-9]+)")
_DELETED = " (deleted)"


def parse(lines: Iterable[str]) -> list[FsCall]:
    """The calls in strace's output, in the order they ended. Lines that are not calls (signals,
    exits) are skipped; a call its process died inside is kept with `result` None."""
    calls: list[FsCall] = []
    pending: dict[int, tuple[str, str]] = {}  # pid -> (name, args so far) of an unfinished call
    cwd: dict[int, str] = {}  # pid -> its working directory, as AT_FDCWD<...> showed it
    for raw in lines:
        m = _LINE.match(raw.rstrip("\n"))
        if m is None:
            continue
        pid = int(m["pid"] or 0)
        rest = m["rest"]
        if (resumed := _RESUMED.match(rest)) is not None:
            name, head = pending.pop(pid, (resumed["name"], ""))
            rest = f"{name}({head}{resumed['args']}"
        call = _CALL.match(rest)
        if call is None or call["name"] not in TRACED:
            continue
        if rest.endswith(_UNFINISHED):
            pending[pid] = (call["name"], call["args"][: -len(_UNFINISHED)])
            continue
        done = _RESULT.match(call["args"])
        if done is None:  # the process died before the call returned (`= ?` is handled below)
            continue
        record = _record(pid, Syscall(call["name"]), _split(done["head"]), done["result"], cwd)
        if record is not None:
            calls.append(record)
    # Calls still unfinished when the trace ends: the process died inside them.
    for pid, (name, head) in pending.items():
        record = _record(pid, Syscall(name), _split(head), "?", cwd)
        if record is not None:
            calls.append(record)
    return calls


def parse_file(path: Path) -> list[FsCall]:
    with path.open(encoding="utf-8", errors="surrogateescape") as f:
        return parse(f)


def _record(pid: int, name: Syscall, args: list[str], result_text: str,
            cwd: dict[int, str]) -> FsCall | None:
    result, error, result_path = _result(result_text)
    injected = result_text.rstrip().endswith(INJECTED_MARK)
    for arg in args:  # learn the working directory from any AT_FDCWD<...>
        fd = _FD.match(arg)
        if fd is not None and fd["fd"] == "AT_FDCWD" and fd["path"] is not None:
            cwd[pid] = _unescape(fd["path"])

    def at(dirfd: str, path: str) -> str:
        return _resolve(_fd_path(dirfd), _string(path), cwd.get(pid))

    S = Syscall
    if name in (S.WRITE, S.WRITEV, S.PWRITE64, S.LSEEK, S.FTRUNCATE, S.FSYNC, S.FDATASYNC, S.CLOSE):
        fd_num, fd_path = _fd(args[0]) if args else (None, None)
        number = None
        if name is S.WRITE and len(args) >= 3:
            number = _int(args[2])
        elif name is S.PWRITE64 and len(args) >= 4:
            number = _int(args[3])
        elif name in (S.LSEEK, S.FTRUNCATE) and len(args) >= 2:
            number = _int(args[1])
        head = _bytes(args[1]) if name in (S.WRITE, S.PWRITE64) and len(args) >= 2 else None
        return FsCall(pid, name, (fd_path,) if fd_path else (), fd_num, number=number, result=result,
                      error=error, injected=injected, head=head)
    if name in (S.OPEN, S.OPENAT, S.CREAT):
        if name is S.OPENAT:
            path, flags = at(args[0], args[1]), args[2] if len(args) > 2 else ""
        else:
            path, flags = at("", args[0]), (args[1] if name is S.OPEN and len(args) > 1
                                             else "O_CREAT|O_WRONLY|O_TRUNC")
        given = _string(args[1] if name is S.OPENAT else args[0]) if args else ""
        return FsCall(pid, name, (result_path or path,), result if error is None else None,
                      flags=frozenset(flags.split("|")), result=result, error=error,
                      relative=not os.path.isabs(given), injected=injected)
    if name in (S.RENAME, S.RENAMEAT, S.RENAMEAT2):
        old, new = ((at("", args[0]), at("", args[1])) if name is S.RENAME
                    else (at(args[0], args[1]), at(args[2], args[3])))
        how = frozenset(args[4].split("|")) if name is S.RENAMEAT2 and len(args) > 4 else frozenset()
        given = _string(args[0] if name is S.RENAME else args[1]) if args else ""
        return FsCall(pid, name, (old, new), flags=how, result=result, error=error,
                      relative=not os.path.isabs(given), injected=injected)
    if name in (S.UNLINK, S.UNLINKAT, S.MKDIR, S.MKDIRAT, S.TRUNCATE):
        path = at(args[0], args[1]) if name in (S.UNLINKAT, S.MKDIRAT) else at("", args[0])
        how = frozenset(args[2].split("|")) if name is S.UNLINKAT and len(args) > 2 else frozenset()
        number = _int(args[1]) if name is S.TRUNCATE and len(args) > 1 else None
        given = _string(args[1] if name in (S.UNLINKAT, S.MKDIRAT) else args[0]) if args else ""
        return FsCall(pid, name, (path,), flags=how, number=number, result=result, error=error,
                      relative=not os.path.isabs(given), injected=injected)
    return None


def _result(text: str) -> tuple[int | None, str | None, str | None]:
    """(value, errno name, path of a returned fd) of `= ...`; value None for `?` (died inside)."""
    text = text.strip()
    if text.startswith("?"):
        return None, None, None
    err = _ERRNO.match(text)
    if err is not None:
        return -1, err["errno"], None
    fd = _FD.match(text.split(" ", 1)[0])
    if fd is not None and fd["fd"] != "AT_FDCWD":
        return int(fd["fd"]), None, _fd_path(text.split(" ", 1)[0])
    try:
        return int(text.split(" ", 1)[0], 0), None, None
    except ValueError:
        return None, None, None


def _fd(arg: str) -> tuple[int | None, str | None]:
    m = _FD.match(arg)
    if m is None or m["fd"] == "AT_FDCWD":
        return None, None
    return int(m["fd"]), _fd_path(arg)


def _fd_path(arg: str) -> str | None:
    m = _FD.match(arg)
    if m is None or m["path"] is None:
        return None
    path = _unescape(m["path"])
    return path.removesuffix(_DELETED)


def _resolve(base: str | None, path: str, cwd: str | None) -> str:
    """An absolute path where it can be told (relative to the dirfd's path, else to the
    process's last known working directory); else the path as given."""
    if os.path.isabs(path):
        return os.path.normpath(path)
    anchor = base or cwd
    return os.path.normpath(os.path.join(anchor, path)) if anchor else path


def _int(text: str) -> int | None:
    try:
        return int(text, 0)
    except ValueError:
        return None


def _string(arg: str) -> str:
    """A quoted C string argument, unescaped (`"..."...` when strace cut it short)."""
    arg = arg.removesuffix("...")
    if len(arg) >= 2 and arg[0] == '"' and arg[-1] == '"':
        return _unescape(arg[1:-1])
    return arg


def _bytes(arg: str) -> bytes | None:
    """A buffer argument's bytes, as far as strace printed them (None: not a quoted string)."""
    arg = arg.removesuffix("...")
    if len(arg) >= 2 and arg[0] == '"' and arg[-1] == '"':
        return _unescape_bytes(arg[1:-1])
    return None


_SIMPLE = {"n": 10, "t": 9, "r": 13, "v": 11, "f": 12, "a": 7, "b": 8, "\\": 92, '"': 34, "'": 39}


def _unescape(text: str) -> str:
    """strace's escapes (octal `\\303`, `\\xNN`, `\\n`, ...) back to the path's bytes, decoded as the
    OS decodes file names."""
    return os.fsdecode(_unescape_bytes(text))


def _unescape_bytes(text: str) -> bytes:
    """strace's escapes back to the bytes they stand for."""
    out = bytearray()
    i = 0
    raw = text.encode("utf-8", errors="surrogateescape")
    while i < len(raw):
        c = raw[i]
        if c != 0x5C or i + 1 == len(raw):
            out.append(c)
            i += 1
            continue
        nxt = chr(raw[i + 1])
        if nxt == "x":
            out.append(int(raw[i + 2:i + 4], 16))
            i += 4
        elif nxt.isdigit():
            j = i + 1
            while j < len(raw) and j < i + 4 and chr(raw[j]) in "01234567":
                j += 1
            out.append(int(raw[i + 1:j], 8))
            i = j
        else:
            out.append(_SIMPLE.get(nxt, ord(nxt)))
            i += 2
    return bytes(out)


def _split(args: str) -> list[str]:
    """Top-level arguments: commas inside quotes, brackets, braces and `<path>` do not split."""
    out: list[str] = []
    depth = 0
    quoted = False
    current: list[str] = []
    i = 0
    while i < len(args):
        c = args[i]
        if quoted:
            current.append(c)
            if c == "\\" and i + 1 < len(args):
                current.append(args[i + 1])
                i += 1
            elif c == '"':
                quoted = False
        elif c == '"':
            quoted = True
            current.append(c)
        elif c in "[{(":
            depth += 1
            current.append(c)
        elif c in "]})":
            depth -= 1
            current.append(c)
        elif c == "<" and current and (current[-1].isdigit() or "".join(current).endswith("AT_FDCWD")):
            end = args.find(">", i)
            end = len(args) - 1 if end < 0 else end
            current.append(args[i:end + 1])
            i = end
        elif c == "," and depth == 0:
            out.append("".join(current).strip())
            current = []
        else:
            current.append(c)
        i += 1
    tail = "".join(current).strip()
    if tail:
        out.append(tail)
    return out
