"""Which process listens on which TCP port, read from /proc: to tell a taken port or a misplaced server apart."""

from __future__ import annotations

import os
import socket
import struct

import psutil


def _decode_address(hex_address: str) -> tuple[str, int]:
    address, port = hex_address.split(":")
    raw = bytes.fromhex(address)
    if len(raw) == 4:
        host = socket.inet_ntop(socket.AF_INET, struct.pack("<I", struct.unpack(">I", raw)[0]))
    else:
        host = socket.inet_ntop(socket.AF_INET6, b"".join(struct.pack("<I", struct.unpack(">I", raw[i:i + 4])[0])
                                                          for i in range(0, 16, 4)))
    return host, int(port, 16)


def _tcp_rows():
    """The fields of each row of the kernel's TCP tables, IPv4 then IPv6 (local address, state, inode: 1, 3, 9)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as file:
                next(file)
                for line in file:
                    yield line.split()
        except OSError:
            continue


def listening_sockets() -> dict[int, tuple[str, int]]:
    """Socket inode -> (host, port) of every listening TCP socket on this machine."""
    return {int(fields[9]): _decode_address(fields[1]) for fields in _tcp_rows() if fields[3] == "0A"}  # TCP_LISTEN


def established_connections(port: int, owner: int | None = None, reads: int = 2) -> int:
    """TCP connections in state ESTABLISHED whose local port is `port` (the server's side of each), in this
    network namespace, as the kernel's tables /proc/net/tcp and /proc/net/tcp6 list them; with owner, only the sockets
    of that process tree (another process's outgoing connection may have the same local port number).

    Counted by socket inode over `reads` reads: a read of a table that other sockets change meanwhile can list a row
    twice or miss one (a count of 63 for 62 was seen beside two other tests)."""
    local_suffix = f":{port:04X}"
    found: set[int] = set()
    for _ in range(reads):
        found |= {int(fields[9]) for fields in _tcp_rows()
                  if fields[3] == "01" and fields[1].endswith(local_suffix)}  # TCP_ESTABLISHED
    if owner is not None:
        found &= set().union(*(socket_inodes(member) for member in process_tree(owner)))
    return len(found)


def process_tree(pid: int) -> list[int]:
    try:
        root = psutil.Process(pid)
        return [pid] + [child.pid for child in root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def process_trees(roots: list[int]) -> dict[int, list[int]]:
    """Each root's pid followed by its live descendants, from one pass over /proc (cheaper than psutil per root)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    trees = {}
    for root in roots:
        members, pending = [], [root] if os.path.exists(f"/proc/{root}") else []
        while pending:
            pid = pending.pop()
            members.append(pid)
            pending.extend(children.get(pid, []))
        trees[root] = members
    return trees


def socket_inodes(pid: int) -> set[int]:
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
    except OSError:
        pass
    return inodes


def listeners_of_tree(pid: int) -> list[tuple[str, int]]:
    """(host, port) of every socket the process tree of pid listens on."""
    listening = listening_sockets()
    inodes = set().union(*(socket_inodes(member) for member in process_tree(pid)))
    return sorted({listening[inode] for inode in inodes if inode in listening})


def port_owner(port: int) -> int | None:
    """PID of a process listening on port (any address), if it can be found."""
    inodes = {inode for inode, (_, listened) in listening_sockets().items() if listened == port}
    if not inodes:
        return None
    for process in psutil.process_iter(["pid"]):
        if socket_inodes(process.info["pid"]) & inodes:
            return process.info["pid"]
    return None
