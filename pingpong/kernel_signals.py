"""What the kernel knows about a cell's traffic: TCP counters, and the TCP options of any runtime's sockets.

The counters (/proc/net/snmp, /proc/net/netstat) belong to the network namespace, so their deltas over a window
count every TCP segment sent on the machine's loopback in that time: the orchestrator runs one cell at a time and
closes its probe connections before the window, so on a quiet namespace the deltas are the pair's own traffic.

Socket options are read from outside the process that owns the socket: pidfd_getfd(2) (Linux >= 5.6) copies the
descriptor into this process, where getsockopt/setsockopt act on the very same socket. That works for Node.js and
Bun, which have no getsockopt, and it lets an A/B experiment force TCP_NODELAY without touching an implementation.
"""

from __future__ import annotations

import ctypes
import os
import socket
from dataclasses import dataclass

from pingpong import listeners

# The counters a cell records, as "Group.Name" of /proc/net/snmp and /proc/net/netstat.
TCP_COUNTERS = ("Tcp.OutSegs", "Tcp.InSegs", "Tcp.RetransSegs", "Tcp.ActiveOpens", "Tcp.PassiveOpens",
                "TcpExt.DelayedACKs", "TcpExt.DelayedACKLost", "TcpExt.TCPAutoCorking", "TcpExt.TCPPureAcks",
                "TcpExt.TCPHPAcks")
SYS_PIDFD_GETFD = 438  # the same number on every Linux architecture
TCP_STATE_ESTABLISHED = "01"


def read_tcp_counters(paths: tuple[str, ...] = ("/proc/net/snmp", "/proc/net/netstat")) -> dict[str, int]:
    """The TCP_COUNTERS now; counters this kernel does not have are left out."""
    values: dict[str, int] = {}
    for path in paths:
        try:
            with open(path) as file:
                lines = file.read().splitlines()
        except OSError:
            continue
        values.update(parse_counter_table(lines))
    return {name: values[name] for name in TCP_COUNTERS if name in values}


def parse_counter_table(lines: list[str]) -> dict[str, int]:
    """/proc/net/snmp-style text (a header line then a value line per group) as {"Group.Name": value}."""
    parsed: dict[str, int] = {}
    for header, row in zip(lines[::2], lines[1::2]):
        group, names = header.split(":", 1)
        _, numbers = row.split(":", 1)
        for name, number in zip(names.split(), numbers.split()):
            try:
                parsed[f"{group}.{name}"] = int(number)
            except ValueError:
                continue
    return parsed


def counter_deltas(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {name: after[name] - before[name] for name in after if name in before}


@dataclass(frozen=True)
class ConnectedSocket:
    pid: int
    fd: int
    local_port: int
    remote_port: int
    family: str  # ipv4 or ipv6


def connected_sockets(root_pid: int, port: int) -> list[ConnectedSocket]:
    """Established TCP sockets of root_pid's process tree with port at either end (the cell's connections)."""
    established = _established_by_inode()
    found = []
    for pid in listeners.process_tree(root_pid):
        try:
            descriptors = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in descriptors:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if not target.startswith("socket:["):
                continue
            entry = established.get(int(target[8:-1]))
            if entry and port in (entry[0], entry[1]):
                found.append(ConnectedSocket(pid, int(fd), entry[0], entry[1], entry[2]))
    return found


def _established_by_inode() -> dict[int, tuple[int, int, str]]:
    table = {}
    for path, family in (("/proc/net/tcp", "ipv4"), ("/proc/net/tcp6", "ipv6")):
        try:
            with open(path) as file:
                next(file)
                for line in file:
                    fields = line.split()
                    if fields[3] == TCP_STATE_ESTABLISHED:
                        local_port = int(fields[1].rsplit(":", 1)[1], 16)
                        remote_port = int(fields[2].rsplit(":", 1)[1], 16)
                        table[int(fields[9])] = (local_port, remote_port, family)
        except OSError:
            continue
    return table


class SocketAccessError(OSError):
    """The socket of another process could not be reached (old kernel, no permission, process gone)."""


def _borrow(pid: int, fd: int) -> socket.socket:
    """A socket object on a copy of another process's descriptor; closing it leaves theirs open."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError as exc:
        raise SocketAccessError(exc.errno, f"pidfd_open({pid}): {exc.strerror}") from None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        copy = libc.syscall(SYS_PIDFD_GETFD, pidfd, fd, 0)
        if copy < 0:
            errno = ctypes.get_errno()
            raise SocketAccessError(errno, f"pidfd_getfd(pid {pid}, fd {fd}): {os.strerror(errno)}")
    finally:
        os.close(pidfd)
    return socket.socket(fileno=copy)


def read_nodelay(connected: ConnectedSocket) -> bool:
    with _borrow(connected.pid, connected.fd) as borrowed:
        return bool(borrowed.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))


def force_nodelay(connected: ConnectedSocket) -> None:
    with _borrow(connected.pid, connected.fd) as borrowed:
        borrowed.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def inspect_sockets(root_pid: int, port: int, force: bool = False) -> dict:
    """TCP_NODELAY of each of the tree's connections on port, as read from the kernel (after forcing it, if asked).

    Returns {"sockets": n, "tcp_nodelay": [bool, ...], "forced": bool} or {"error": "..."} when unreadable.
    """
    sockets = connected_sockets(root_pid, port)
    try:
        if force:
            for connected in sockets:
                force_nodelay(connected)
        values = [read_nodelay(connected) for connected in sockets]
    except OSError as exc:
        return {"sockets": len(sockets), "error": str(exc)}
    return {"sockets": len(sockets), "tcp_nodelay": values, "forced": force,
            "families": sorted({connected.family for connected in sockets})}
