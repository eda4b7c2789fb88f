"""Agents reach nothing but the fakes: the command moves into a network namespace of its own.

Before it starts a fake or an agent, the command unshares its network namespace (as root, or
unprivileged inside a user namespace of its own where the kernel allows one) and brings its
loopback up. The fakes listen on that loopback and every agent inherits the namespace, so an
agent can reach the fakes and nothing else: no vendor endpoint with a real key, no DNS, no other
service on the machine (a local database included: `CRASHMATRIX_NETWORK=host` keeps the
machine's network, for an agent that needs one, and the command says so). Where isolation is not
possible the command says so at its start, and why.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import fcntl
import os
import socket
import struct
import sys

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
IFREQ = "16sh22x"  # struct ifreq: the name, the flags, padding to 40 bytes
NETWORK_ENV = "CRASHMATRIX_NETWORK"  # "host": keep the machine's network


_why_not: str | None = None  # why `isolate` could not isolate this process, when it could not


def isolate() -> str | None:
    """Move this process into a new network namespace with only loopback, up. None when done;
    else why not (the caller says it). Call before any thread starts (a user namespace cannot
    be entered by a process with threads)."""
    global _why_not
    _why_not = _isolate()
    return _why_not


def exposure() -> str | None:
    """What the agents this process starts can reach beyond loopback, and why; None when this
    process's network namespace has no interface but loopback (what a report may then say is
    isolated is observed here, not assumed from a call made earlier)."""
    try:
        names = sorted(name for _, name in socket.if_nameindex() if name != "lo")
    except OSError as exc:
        return f"its network interfaces could not be listed ({exc})"
    if not names:
        return None
    why = _why_not or "the command was not isolated (started other than as `crashmatrix`)"
    return f"agents shared this machine's network (interfaces {', '.join(names)}): {why}"


def _isolate() -> str | None:
    if os.environ.get(NETWORK_ENV) == "host":
        return f"{NETWORK_ENV}=host keeps the machine's network"
    if not sys.platform.startswith("linux"):
        return "network namespaces are Linux's"
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError as exc:
        return f"libc could not be loaded ({exc})"
    if libc.unshare(CLONE_NEWNET) != 0:
        uid, gid = os.getuid(), os.getgid()
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
            return f"unshare failed: {os.strerror(ctypes.get_errno())} (no user namespaces here?)"
        try:  # the same uid and gid inside, so files keep their owner
            with open("/proc/self/setgroups", "w", encoding="ascii") as f:
                f.write("deny")
            with open("/proc/self/uid_map", "w", encoding="ascii") as f:
                f.write(f"{uid} {uid} 1")
            with open("/proc/self/gid_map", "w", encoding="ascii") as f:
                f.write(f"{gid} {gid} 1")
        except OSError as exc:
            return f"the user namespace could not be mapped ({exc})"
    try:
        _loopback_up()
    except OSError as exc:
        return f"the namespace's loopback could not be brought up ({exc})"
    return None


def _loopback_up() -> None:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_DGRAM)) as s:
        _, flags = struct.unpack(IFREQ, fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack(IFREQ, b"lo", 0)))
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack(IFREQ, b"lo", flags | IFF_UP))
