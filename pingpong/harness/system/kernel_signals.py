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
import errno
import os
import socket
import struct

# The counters a cell records, as "Group.Name" of /proc/net/snmp and /proc/net/netstat.
TCP_COUNTERS = ("Tcp.OutSegs", "Tcp.InSegs", "Tcp.RetransSegs", "Tcp.ActiveOpens", "Tcp.PassiveOpens",
                "TcpExt.DelayedACKs", "TcpExt.DelayedACKLost", "TcpExt.TCPAutoCorking", "TcpExt.TCPPureAcks",
                "TcpExt.TCPHPAcks")
CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
SYS_PIDFD_GETFD = 438  # the same number on every Linux architecture
LIBC = ctypes.CDLL(None, use_errno=True)


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


def parse_cpu_steal(text: str) -> dict[str, int]:
    """Steal time per CPU from /proc/stat, in clock ticks: {"cpu0": ticks, ...} (the 8th number of each cpuN line:
    time this guest's virtual CPU was ready to run while the hypervisor ran something else)."""
    steal = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > 8 and fields[0].startswith("cpu") and fields[0] != "cpu":
            steal[fields[0]] = int(fields[8])
    return steal


def read_cpu_steal(path: str = "/proc/stat") -> dict[str, int]:
    try:
        with open(path) as file:
            return parse_cpu_steal(file.read())
    except (OSError, ValueError):
        return {}


def steal_seconds(before: dict[str, int], after: dict[str, int], cpus: set[str] | None = None) -> dict[str, float]:
    """Seconds of steal per CPU between two readings, for the CPUs named (all by default)."""
    return {cpu: (after[cpu] - before[cpu]) / CLOCK_TICKS_PER_S for cpu in after
            if cpu in before and (cpus is None or cpu in cpus)}


class SocketAccessError(OSError):
    """The socket of another process could not be reached (old kernel, no permission, process gone)."""


def _borrow(pid: int, fd: int) -> socket.socket:
    """A socket object on a copy of another process's descriptor; closing it leaves theirs open."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError as exc:
        raise SocketAccessError(exc.errno, f"pidfd_open({pid}): {exc.strerror}") from None
    try:
        copy = LIBC.syscall(SYS_PIDFD_GETFD, pidfd, fd, 0)
        if copy < 0:
            errno = ctypes.get_errno()
            raise SocketAccessError(errno, f"pidfd_getfd(pid {pid}, fd {fd}): {os.strerror(errno)}")
    finally:
        os.close(pidfd)
    try:
        return socket.socket(fileno=copy)
    except OSError as exc:  # the number was reused for something else since the listing: the copy is not kept
        os.close(copy)
        raise SocketAccessError(exc.errno, f"fd {fd} of pid {pid}: {exc.strerror}") from None


def _borrowed_sockets(pids: list[int]):
    """A copy of every socket descriptor of these processes, in turn (the caller closes each); one closed, exited or
    reused since the listing is passed over."""
    for pid in pids:
        for fd in _socket_descriptors(pid):
            try:
                yield _borrow(pid, fd)
            except SocketAccessError as exc:
                if exc.errno in (errno.EBADF, errno.ESRCH, errno.ENOTSOCK):
                    continue
                raise


def _connects_to(sock: socket.socket, port: int, either_end: bool = False) -> bool:
    """Whether sock is a connected TCP socket with port at its far end (either_end: at its local or far end)."""
    if sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
        return False
    try:
        peer = sock.getpeername()
    except OSError:  # listening or not connected
        return False
    return peer[1] == port or (either_end and sock.getsockname()[1] == port)


def inspect_sockets(pids: list[int], port: int, force: bool = False) -> dict:
    """TCP_NODELAY of each connection of these processes with port at either end, as the kernel has it.

    Every socket descriptor of the tree is borrowed (pidfd_getfd) and kept when it is a connected TCP socket with
    port at one end; forcing sets TCP_NODELAY on it first. Borrowing costs microseconds per descriptor, much less
    than reading /proc/net/tcp, so this can run at the start of a measured window.
    Returns {"sockets": n, "tcp_nodelay": [bool, ...], "forced": bool, "families": [...]} or, when the sockets
    cannot be reached, {"sockets": n, "error": "..."}.
    """
    values, families, count = [], set(), 0
    try:
        for borrowed in _borrowed_sockets(pids):
            with borrowed:
                if not _connects_to(borrowed, port, either_end=True):
                    continue
                count += 1
                if force:
                    borrowed.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                values.append(bool(borrowed.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)))
                families.add("ipv6" if borrowed.family == socket.AF_INET6 else "ipv4")
    except OSError as exc:
        return {"sockets": count, "error": str(exc)}
    return {"sockets": count, "tcp_nodelay": values, "forced": force, "families": sorted(families)}


def _socket_descriptors(pid: int) -> list[int]:
    found = []
    try:
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return found
    for fd in descriptors:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:["):
                found.append(int(fd))
        except OSError:
            continue
    return found


def merge_socket_readings(readings: list[dict], forced: bool) -> dict | None:
    """One side's TCP_NODELAY readings from several processes (or hosts) as one: counts added, flags listed."""
    if not readings:
        return None
    if len(readings) == 1:
        return readings[0]
    errors = [r["error"] for r in readings if "error" in r]
    if errors:
        return {"sockets": sum(r["sockets"] for r in readings), "error": errors[0]}
    return {"sockets": sum(r["sockets"] for r in readings),
            "tcp_nodelay": [value for r in readings for value in r["tcp_nodelay"]],
            "forced": forced,
            "families": sorted({family for r in readings for family in r["families"]})}


# What a measurement from outside reads of each connection: struct tcp_info (linux/tcp.h), name -> (format, offset).
# data_segs_in counts the segments that carried data into the socket (RFC 4898 DataSegsIn, Linux >= 4.6).
TCP_INFO_FIELDS = {"snd_mss": ("I", 16), "bytes_acked": ("Q", 120), "bytes_received": ("Q", 128),
                   "data_segs_in": ("I", 152), "data_segs_out": ("I", 156)}
TCP_INFO_LENGTH = 160  # up to data_segs_out: what the fields above need


def parse_tcp_info(raw: bytes) -> dict[str, int]:
    """The TCP_INFO_FIELDS of a getsockopt(TCP_INFO) buffer."""
    if len(raw) < TCP_INFO_LENGTH:
        raise ValueError(f"TCP_INFO gave {len(raw)} bytes; data_segs_in needs {TCP_INFO_LENGTH} (Linux >= 4.6)")
    return {name: struct.unpack_from(kind, raw, offset)[0] for name, (kind, offset) in TCP_INFO_FIELDS.items()}


def connection_counters(pids: list[int], port: int) -> dict[int, dict[str, int]]:
    """The kernel's counters (TCP_INFO_FIELDS) of each connection of these processes with port at its far end, keyed
    by the connection's local port. Sockets are borrowed as inspect_sockets does: microseconds per descriptor, so
    this can mark a measured window's edges. Raises SocketAccessError when a socket cannot be reached."""
    found: dict[int, dict[str, int]] = {}
    for borrowed in _borrowed_sockets(pids):
        with borrowed:
            if _connects_to(borrowed, port):
                raw = borrowed.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_LENGTH)
                found[borrowed.getsockname()[1]] = parse_tcp_info(raw)
    return found


class HeldConnections:
    """The connections of these processes with port at their far end, borrowed once (as connection_counters borrows
    them) and held, so that the data segments they have received can be read many times in a window at the cost of
    a getsockopt each (microseconds). Held copies keep a connection open after its process closes it, until close().
    Raises SocketAccessError when a socket cannot be reached."""

    def __init__(self, pids: list[int], port: int) -> None:
        self._held: list[socket.socket] = []
        seen: set[int] = set()  # sockets by inode: one that two processes of the tree share counts once
        try:
            for borrowed in _borrowed_sockets(pids):
                inode = os.fstat(borrowed.fileno()).st_ino
                if inode in seen or not _connects_to(borrowed, port):
                    borrowed.close()
                    continue
                seen.add(inode)
                self._held.append(borrowed)
        except BaseException:
            self.close()
            raise

    @property
    def connections(self) -> int:
        return len(self._held)

    def segments_in(self) -> int:
        """The data segments every held connection has received so far, added up."""
        return sum(parse_tcp_info(held.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_LENGTH))
                   ["data_segs_in"] for held in self._held)

    def close(self) -> None:
        for held in self._held:
            held.close()
        self._held = []


def counters_delta(before: dict[int, dict[str, int]], after: dict[int, dict[str, int]]) -> dict[str, int]:
    """Each counter's growth, added up over the connections open at both readings (by local port); "connections"
    counts those, and snd_mss is the smallest of theirs."""
    common = sorted(set(before) & set(after))
    delta = {name: sum(after[port][name] - before[port][name] for port in common)
             for name in TCP_INFO_FIELDS if name != "snd_mss"}
    return delta | {"connections": len(common), "snd_mss": min((after[port]["snd_mss"] for port in common),
                                                               default=0)}
