"""Which cells are odd, and the likely why: pure functions over a run's per-cell summaries.

Two kinds of flag:
- the model: in a ping-pong matrix a cell's rate is roughly (how fast the server is) × (how fast the client is).
  Fitting log(rate) = server factor + client factor by least squares gives every cell an expected rate; a cell
  far below it (observed/expected < MODEL_THRESHOLD) is slow *for this pair*, not because of its row or column.
  Outliers are removed one at a time, worst first, each judged against a fit that leaves it out, so one or two
  bad cells cannot drag their row's and column's factors down and hide themselves or each other.
- rules over the signals recorded per cell: TCP segments and delayed ACKs per roundtrip, negotiated compression
  on small messages, sockets without TCP_NODELAY, page faults per roundtrip, and sides that mostly wait.

Each applies where it means something for the workload. In an open loop every cell answers the rate it is offered,
so the model (which compares rates) has nothing to judge: a cell is odd there when it saturates at the offered
rate (its p99 past the threshold, or less than 95% answered); the per-roundtrip page faults, counted at a rate
the run chose, say nothing about the pair either. Every flag belongs to one cause (CAUSES), so a report can group
the cells by what is wrong with them.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

Cell = tuple[str, str]  # (server, client)

MODEL_THRESHOLD = 1 / 3
SEGMENTS_PER_MESSAGE_LIMIT = 1.1
DELAYED_ACKS_PER_ROUNDTRIP_LIMIT = 0.01
RETRANSMITS_PER_ROUNDTRIP_LIMIT = 0.01
# Minor page faults per roundtrip on one side, in the window's interior: a side that maps fresh memory for each
# message it reads takes several per message (a Python side with --malloc as-is, glibc's mmap per asyncio read:
# 3.99-4.00 in every second of a minute, docs/methodology.md); a garbage collector's stay below 2 (a Node.js client:
# 0.2-1.7 in the malloc sweep; 0.6-0.9 in a healthy node-ws pair whose host ran slow, in both halves of the interior).
# The line sits between them, a factor 2 from each, so that neither crosses it with the host's speed.
FAULTS_PER_ROUNDTRIP_LIMIT = 2.0
# A side's allocator is settled when the page faults of its window's interior (those that grow with the roundtrips)
# cost less than this share of a roundtrip, at the cost of a fault the run measured (system/page_faults.py): a
# transient that costs less cannot move the cell's rate by a third of the +-3% a run aims at, and a steady cost per
# message that small is the runtime's own (Bun's collector: 0.03-0.07 faults per roundtrip in a pair alone,
# docs/methodology.md). A number of faults alone (the line below) meant more on a slow host, where each window has
# fewer roundtrips for a cost paid per unit of time, and said nothing of what they cost. Above it, the cell says so.
SETTLED_COST_SHARE = 0.01
# Files without the run's cost of a fault (before 2026-11-28 23:50 UTC) keep the former line: at most this many minor page faults
# per roundtrip in the interior.
SETTLED_FAULTS_PER_ROUNDTRIP = 0.1
SMALL_MESSAGE_BYTES = 1024  # below this, deflate cannot save bytes worth its CPU, and a message fits one segment
WAITING_UTILIZATION = 0.3  # CPU time / wall time below this on both sides: the pair waits, it does not compute
ENVELOPE_TOLERANCE = 2.0  # an expectation may exceed the best rate seen in its row or column by this much at most
FIT_ITERATIONS = 500
FIT_TOLERANCE = 1e-9


def fit_log_factors(rates: dict[Cell, float]) -> tuple[dict[str, float], dict[str, float]]:
    """Least squares fit of log(rate) = server factor + client factor, by alternating means (converges to LS).

    Cells may be missing; each connected block of the matrix gets its own consistent factors.
    """
    logs = {cell: math.log(rate) for cell, rate in rates.items() if rate > 0}
    by_server: dict[str, list[tuple[str, float]]] = {}
    by_client: dict[str, list[tuple[str, float]]] = {}
    for (server, client), value in logs.items():
        by_server.setdefault(server, []).append((client, value))
        by_client.setdefault(client, []).append((server, value))
    server_factor = {server: 0.0 for server in by_server}
    client_factor = {client: 0.0 for client in by_client}
    for _ in range(FIT_ITERATIONS):
        for client, cells in by_client.items():
            client_factor[client] = sum(value - server_factor[s] for s, value in cells) / len(cells)
        change = 0.0
        for server, cells in by_server.items():
            new = sum(value - client_factor[c] for c, value in cells) / len(cells)
            change = max(change, abs(new - server_factor[server]))
            server_factor[server] = new
        if change < FIT_TOLERANCE:
            break
    return server_factor, client_factor


def expected_rate(others: dict[Cell, float], cell: Cell) -> float | None:
    """The rate the model fitted on others predicts for cell; None when its row or column is not among them."""
    server, client = cell
    if not any(s == server for s, _ in others) or not any(c == client for _, c in others):
        return None
    server_factor, client_factor = fit_log_factors(others)
    return math.exp(server_factor[server] + client_factor[client])


def envelope(others: dict[Cell, float], cell: Cell) -> float:
    """The best rate seen among others in cell's row or column: what its server and client reach elsewhere."""
    return max((rate for (s, c), rate in others.items() if s == cell[0] or c == cell[1]), default=0.0)


def _judge_removal(kept: dict[Cell, float], cells: tuple[Cell, ...], threshold: float) -> float | None:
    """The worst observed/expected ratio of cells, judged by a fit without them; None if not all are outliers.

    An outlier must be below threshold, and its expectation must stay within reach of its row's and column's
    best (ENVELOPE_TOLERANCE): a fit that calls a cell slow by expecting more than anything near it measured is
    blaming the wrong cells.
    """
    others = {cell: rate for cell, rate in kept.items() if cell not in cells}
    worst = 0.0
    for cell in cells:
        expected = expected_rate(others, cell)
        if expected is None or expected > ENVELOPE_TOLERANCE * envelope(others, cell):
            return None
        ratio = kept[cell] / expected
        if ratio >= threshold:
            return None
        worst = max(worst, ratio)
    return worst


def model_outliers(rates: dict[Cell, float], threshold: float = MODEL_THRESHOLD) -> dict[Cell, dict[str, Any]]:
    """Every judgeable cell's {"expected", "ratio", "outlier"}; ratio = observed / expected.

    Removes outliers a step at a time: the single cell that is furthest below a fit without it; or, when no single
    cell qualifies, two cells sharing a row or column, judged by a fit without both (two slow cells in one column
    pull its factor down and hide each other from a one-at-a-time test). Final expectations: for kept cells, a fit
    over the other kept cells; for outliers, a fit over all kept cells.
    """
    kept = dict(rates)
    removed: list[Cell] = []
    while len(kept) > 2:
        candidates = [((cell,), _judge_removal(kept, (cell,), threshold)) for cell in kept]
        candidates = [(cells, ratio) for cells, ratio in candidates if ratio is not None]
        if not candidates:
            pairs = [(a, b) for i, a in enumerate(kept) for b in list(kept)[i + 1:] if a[0] == b[0] or a[1] == b[1]]
            candidates = [(pair, _judge_removal(kept, pair, threshold)) for pair in pairs]
            candidates = [(cells, ratio) for cells, ratio in candidates if ratio is not None]
        if not candidates:
            break
        cells, _ = min(candidates, key=lambda candidate: candidate[1])
        for cell in cells:
            removed.append(cell)
            del kept[cell]
    verdicts = {}
    for cell, rate in rates.items():
        others = {other: value for other, value in kept.items() if other != cell}
        expected = expected_rate(others, cell)
        if expected:
            verdicts[cell] = {"expected": expected, "ratio": rate / expected, "outlier": cell in removed}
    return verdicts


# A flag's cause, from words in it (rule_flags and annotate write them): (marker, short cause).
CAUSES = (
    ("slower than its server and client predict", "slow for this pair (the model)"),
    ("saturated at the offered rate", "saturated at the offered rate"),
    ("TCP segments per message", "messages written in pieces"),
    ("delayed ACKs per roundtrip", "delayed ACKs"),
    ("TCP retransmissions", "retransmissions on loopback"),
    ("permessage-deflate negotiated for", "permessage-deflate on small messages"),
    ("TCP_NODELAY off", "TCP_NODELAY off"),
    ("page faults per roundtrip on the server", "page faults, server side"),
    ("page faults per roundtrip on the client", "page faults, client side"),
    ("both sides mostly wait", "both sides mostly wait"),
)


def flag_cause(flag: str) -> str:
    """The short cause of one flag (CAUSES); the flag itself for one no rule wrote."""
    for marker, cause in CAUSES:
        if marker in flag:
            return cause
    return flag


def fault_cause(runtime: str | None, malloc: str | None) -> str:
    """Why a side of this runtime maps fresh memory for messages, as far as the suite knows it."""
    if runtime == "python":
        return ("a Python side with --malloc as-is: an mmap per asyncio read" if malloc == "as-is" else
                "a Python side: glibc's allocator maps and unmaps buffers past its mmap threshold")
    if runtime in ("node", "bun"):
        engine = "V8" if runtime == "node" else "JavaScriptCore"
        return f"a {'Node.js' if runtime == 'node' else 'Bun'} side: {engine}'s heap taking new pages as it grows"
    if runtime == "native":
        return "a compiled side: its allocator or library maps buffers per message"
    return "its runtime is not recorded"


def rule_flags(summary, payload_size: int, workload: str = "pingpong",
               runtimes: dict[str, str | None] | None = None, malloc: str | None = None) -> list[str]:
    """One-line reasons from one cell's recorded signals (a summary.CellSummary); empty for a healthy cell.

    The TCP segment, delayed-ACK and TCP_NODELAY rules assume long-lived connections. In the handshake workload,
    SYNs, FINs and upgrade segments are its very subject, and the connection being opened when the sockets are
    read may not have its options set yet, so those rules are left out there. The per-roundtrip counts assume
    one message each way per roundtrip (not so in broadcast or open loop), and an open loop below saturation
    waits by design. In an open loop the page faults per roundtrip are counted at the rate the run offered, not one
    the pair reached, so that rule is left out too; a saturated open-loop cell is flagged instead.
    runtimes: {"server": runtime, "client": runtime} of the cell's two sides, to name what a side's signal means.
    """
    flags = []
    runtimes = runtimes or {}
    open_loop = (summary.workload or {}).get("open_loop") if workload == "open-loop" else None
    if open_loop and open_loop.get("saturated"):
        flags.append(f"saturated at the offered rate: {open_loop.get('saturated_because')}")
    connections_persist = workload != "handshake"
    one_message_each_way = workload == "pingpong"
    segments = summary.segments_per_message if one_message_each_way else None
    # Small messages fit one segment; large ones are split by the MSS and draw pure ACKs, which is normal.
    if segments is not None and segments > SEGMENTS_PER_MESSAGE_LIMIT and payload_size < SMALL_MESSAGE_BYTES:
        flags.append(f"{segments:.2f} TCP segments per message (a healthy pair sends 1): messages are written in "
                     f"pieces")
    delayed = summary.delayed_acks_per_roundtrip if one_message_each_way else None
    if delayed is not None and delayed > DELAYED_ACKS_PER_ROUNDTRIP_LIMIT:
        flags.append(f"{delayed:.2f} delayed ACKs per roundtrip: a side waits ~40 ms for the peer's delayed ACK "
                     f"before it may send (Nagle's algorithm)")
    retransmits = summary.retransmits_per_roundtrip
    if retransmits is not None and retransmits > RETRANSMITS_PER_ROUNDTRIP_LIMIT:
        flags.append(f"{retransmits:.2f} TCP retransmissions per roundtrip on loopback")
    if summary.compression_negotiated and payload_size < SMALL_MESSAGE_BYTES:
        flags.append(f"permessage-deflate negotiated for {payload_size}-byte messages: every message goes through "
                     f"zlib for nothing (rerun with --compression off to compare)")
    off = [side for side in ("server", "client") if connections_persist and summary.tcp_nodelay(side) is False]
    if off:
        flags.append(f"TCP_NODELAY off on the {' and '.join(off)}'s sockets: Nagle's algorithm may hold small "
                     f"writes back")
    for side in ("server", "client") if workload != "open-loop" else ():
        cpu = summary.cpu(side)  # what grows with the roundtrips (the window's interior), not what it pays once
        faults = (cpu.interior_faults_per_roundtrip if cpu.interior_faults_per_roundtrip is not None
                  else cpu.minor_faults_per_roundtrip)
        if faults is not None and faults > FAULTS_PER_ROUNDTRIP_LIMIT:
            flags.append(f"{faults:.1f} page faults per roundtrip on the {side} side: it maps fresh memory for "
                         f"messages ({fault_cause(runtimes.get(side), malloc)})")
    server_utilization = summary.server_cpu.utilization
    client_utilization = summary.client_cpu.utilization
    if (workload != "open-loop" and server_utilization is not None and client_utilization is not None
            and max(server_utilization, client_utilization) < WAITING_UTILIZATION):
        flags.append(f"both sides mostly wait: CPU/wall {server_utilization:.2f} server, {client_utilization:.2f} "
                     f"client (a computing side is near 1)")
    return flags


def annotate(summaries: dict, payload_size: int, workload: str = "pingpong",
             runtimes: dict[tuple[str, str], str | None] | None = None, malloc: str | None = None,
             young_generation: str | None = None) -> dict:
    """The summaries with "flags" (one-line reasons) and the model's expected rate on every measured one.

    summaries: {(server, client): summary.CellSummary}; returns a new dict of new records, in the same order.
    runtimes: {(role, name): runtime} of the run's implementations; malloc: the run's --malloc; young_generation:
    its --young-generation (None: a file from before it, where V8's grew).
    """
    runtimes = runtimes or {}
    rates = {cell: summary.roundtrips_per_s.median for cell, summary in summaries.items() if summary.measured}
    verdicts = model_outliers(rates) if workload != "open-loop" else {}
    annotated = {}
    for cell, summary in summaries.items():
        if cell not in rates:
            annotated[cell] = summary
            continue
        flags = []
        verdict = verdicts.get(cell)
        if verdict:
            summary = replace(summary, expected_roundtrips_per_s=round(verdict["expected"], 1),
                              rate_vs_expected=round(verdict["ratio"], 4))
            if verdict["outlier"]:
                flags.append(f"{1 / verdict['ratio']:.1f}× slower than its server and client predict "
                             f"({rates[cell]:,.0f} against an expected {verdict['expected']:,.0f} roundtrips/s)")
        flags += rule_flags(summary, payload_size, workload,
                            {"server": runtimes.get(("server", cell[0])), "client": runtimes.get(("client", cell[1]))},
                            malloc)
        annotated[cell] = replace(summary, flags=tuple(flags),
                                  unsettled=unsettled_notes(summary, runtimes.get(("server", cell[0])),
                                                            runtimes.get(("client", cell[1])), malloc,
                                                            young_generation))
    return annotated


def unsettled_notes(summary, server_runtime: str | None, client_runtime: str | None,
                    malloc: str | None, young_generation: str | None = None) -> tuple[str, ...]:
    """One line per side whose allocator did not stay settled in some attempt (SETTLED_COST_SHARE),
    with why as far as the suite knows; nothing with --malloc as-is, which settles nothing on purpose."""
    if malloc == "as-is":
        return ()
    notes = []
    for side, runtime in (("server", server_runtime), ("client", client_runtime)):
        cpu = summary.cpu(side)
        if not cpu.unsettled_attempts:
            continue
        if cpu.max_fault_cost_share is not None:
            notes.append(f"{side} not settled in {cpu.unsettled_attempts} of {cpu.faults_checked} attempts: its page "
                         f"faults took up to {cpu.max_fault_cost_share:.1%} of a roundtrip (up to "
                         f"{cpu.max_faults_per_roundtrip:.2f} per roundtrip; {SETTLED_COST_SHARE:.0%} or more is not "
                         f"settled; {unsettled_cause(runtime, young_generation)})")
        else:
            notes.append(f"{side} not settled in {cpu.unsettled_attempts} of {cpu.faults_checked} attempts: up to "
                         f"{cpu.max_faults_per_roundtrip:.2f} page faults per roundtrip (over "
                         f"{SETTLED_FAULTS_PER_ROUNDTRIP:g}; {unsettled_cause(runtime, young_generation)})")
    return tuple(notes)


def unsettled_cause(runtime: str | None, young_generation: str | None = None) -> str:
    """Why a side of this runtime can take page faults with glibc's thresholds fixed, as far as the suite knows;
    young_generation: the run's --young-generation (None: a file from before it, where V8's grew)."""
    if runtime == "python":
        return ("a Python side with glibc's thresholds fixed: faults not per message but a few hundred a second, "
                "on CPython not from its arenas either (a lead: docs/methodology.md, the allocator's state); on PyPy "
                "(--python) its own garbage collector maps its heap, which glibc's thresholds do not govern")
    if runtime == "node" and young_generation == "fixed":
        return ("V8's heap beyond its young generation (held at 1 MiB a semi-space, --young-generation fixed): its "
                "old generation or code space still growing")
    if runtime == "node":
        return ("V8's young generation still growing: a Node.js client took 0.005-0.013 per roundtrip a second into "
                "its process (docs/methodology.md, the Node.js built-in client's faults; --young-generation fixed "
                "holds it at 1 MiB a semi-space)")
    if runtime == "bun":
        return "Bun's own allocator and JavaScriptCore's heap: glibc's tunables do not reach them"
    if runtime == "native":
        return "a compiled side: its allocator or its runtime's garbage collector"
    return "its runtime is not recorded"
