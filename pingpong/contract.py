"""The contract's vocabulary, defined once: what the orchestrator and every implementation agree on.

A leaf: it imports nothing from the project, so both worlds import it (pingpong/kit in the server and client
processes, pingpong/harness in run_bench.py's). The JavaScript and C programs cannot import it; tests/test_contract.py
holds their copies (node/driver/*.js, node/server_support.js, node/dependencies.js, native/*.c) and manifest.toml to it.
"""

# Event loops a Python implementation can be asked for; "auto" is what the program gets by itself.
LOOPS = ("auto", "asyncio", "uvloop")
# --compression: permessage-deflate as each library ships it ("default"), refused/not offered ("off"), or on.
COMPRESSION_MODES = ("default", "off", "on")
# --workload: roundtrips on open connections; connections opened, one roundtrip, closed, in a loop; or one sender
# whose every message the server relays to many receivers (fan-out), which acknowledge it before the next.
WORKLOADS = ("pingpong", "handshake", "broadcast")
# --broadcast-role: the process holding the sender connection (and some receivers), or one holding receivers only.
BROADCAST_ROLES = ("sender", "receivers")
# What an implementation supports beyond one ping-pong pair in plain ws:// (listed in its manifest entry):
# pairs = a client drives --pairs N at once; handshake = a client runs --workload handshake; tls = wss:// / TLS;
# broadcast = --workload broadcast (a server: relays to many members of a room); idle-connections = a client holds
# --idle-connections N (a server: holds them); open-loop = a client sends at --rate R (a server: keeps up or queues).
# start-gate: the client honours START_FD_ENV, so the orchestrator may start it ahead of its turn.
# workers: a server runs --workers N processes on one port, a room's members on other workers reached through the
# Redis broker named by --broker (docs/workloads.md, "Every core"). threads: a server runs --workers N threads in one
# process, its rooms in memory, no broker. A server with neither uses one CPU only. thread-ports: a threads server
# whose thread i (--worker-ports) runs a loop of its own on PORT+1+i, and writes its counts with its thread id, as a
# worker does: it can be placed by room (--room-placement room).
FEATURES = ("pairs", "handshake", "tls", "broadcast", "idle-connections", "open-loop", "start-gate", "workers",
            "threads", "thread-ports")
# The features that say how a server uses N CPUs (--workers N); a server declares at most one.
CPU_FEATURES = ("workers", "threads")
WORKLOAD_FEATURES = ("broadcast", "idle-connections", "open-loop")
# --payload-kind: what a message holds (pingpong/kit/payloads.py and node/payloads.js generate them).
PAYLOAD_KINDS = ("text-ascii", "text-utf8", "binary")

# Defaults every program shares when the orchestrator does not say otherwise.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_LOOP = "auto"
DEFAULT_COMPRESSION = "default"
DEFAULT_WORKLOAD = "pingpong"
DEFAULT_DURATION_S = 5.0
DEFAULT_WARMUP_S = 1.0
DEFAULT_STALL_TIMEOUT_S = 10.0
DEFAULT_PAYLOAD_SIZE = 4
DEFAULT_PAYLOAD_KIND = "text-ascii"
DEFAULT_PAIRS = 1

# The flags of the CLI contract (docs/contract.md). An implementation may accept fewer (its manifest entry
# says which features it has) but never other ones.
SERVER_FLAGS = ("--host", "--port", "--loop", "--compression", "--tls-cert", "--tls-key", "--workers", "--broker",
                "--worker-ports")
CLIENT_FLAGS = ("--url", "--duration", "--warmup", "--loop", "--compression", "--payload-size", "--payload-kind",
                "--workload", "--tls-ca", "--pairs", "--stall-timeout", "--no-latency", "--ab-windows", "--receivers",
                "--broadcast-role", "--ack-processes", "--idle-connections", "--rate")

# Environment variables the orchestrator sets for the processes it starts.
EVENTS_FD_ENV = "PINGPONG_EVENTS_FD"  # a client writes its events (the lines below) to this fd
GO_FD_ENV = "PINGPONG_GO_FD"  # the start barrier: a client reads GO_LINE here after READY_EVENT, then warms up
# Started ahead of its turn: a client writes ARMED_EVENT once loaded, then reads GO_LINE here before it connects.
START_FD_ENV = "PINGPONG_START_FD"
INFO_FILE_ENV = "PINGPONG_INFO_FILE"  # a server writes its report (loop, versions, settings) to this file
NODE_MODULES_ENV = "PINGPONG_NODE_MODULES"  # JavaScript programs load npm packages from here (--node-packages)
NODE_EXTRA_CA_CERTS_ENV = "NODE_EXTRA_CA_CERTS"  # the WHATWG clients' only way to trust the run's --tls CA
# A server with the "workers" feature: each worker writes its counts (worker_rooms.py's WORKER_COUNTS) as JSON to
# DIR/worker-<pid>.json once it serves, and again when it stops.
WORKER_STATS_DIR_ENV = "PINGPONG_WORKER_STATS_DIR"
# --broker: rooms cross workers only when they must (docs/contract.md, "Rooms across workers"). A worker id is its
# pid in decimal. A worker with members in room R SUBSCRIBEs BROKER_CHANNEL_PREFIX + R (only while it has some) and
# PUBLISHes a member's message there only when another worker has members in R, as
# b"<origin worker id>:<t|b>:" + the message's bytes (t: text, b: binary).
BROKER_CHANNEL_PREFIX = "pingpong:room:"
# Which workers have members in R: the Redis set BROKER_WORKERS_KEY_PREFIX + R of their ids, and notices on
# BROKER_PRESENCE_CHANNEL, b"j:<id>:<nonce>:<R>" (joined) or b"l:<id>::<R>" (left), which every worker SUBSCRIBEs
# with BROKER_WORKER_CHANNEL_PREFIX + its id before it serves. A worker's first member in R: SUBSCRIBE R's channel
# (confirmed), then in one MULTI: SADD itself, SMEMBERS (the snapshot), PUBLISH its join notice. Its view of R is the
# snapshot plus the notices after its own in the presence channel (the MULTI orders the set and the notices). Every
# worker answers another's join notice with b"<its id>:<nonce>:<R>" on BROKER_WORKER_CHANNEL_PREFIX + <joiner's id>
# once applied; the join is complete, and the member's handshake answered, when every other worker of the snapshot
# has answered and the joiner has seen its own notice. Its last member gone: SREM and PUBLISH a leave notice in one
# MULTI, then UNSUBSCRIBE.
BROKER_WORKERS_KEY_PREFIX = "pingpong:room-workers:"
BROKER_PRESENCE_CHANNEL = "pingpong:presence"
BROKER_WORKER_CHANNEL_PREFIX = "pingpong:worker:"
# --workload broadcast with several client processes: one pipe shared by all. A receivers process writes one byte
# to its write end when all its receivers have a message; the sender reads --ack-processes bytes per message here.
ACK_FD_ENV = "PINGPONG_ACK_FD"
# glibc malloc's state in every process the suite starts (pingpong/kit/allocator.py): "settled" (the default) fixes
# its mmap and trim thresholds through GLIBC_TUNABLES, so no process's first moments decide whether each read buffer
# is mapped and unmapped; "as-is" leaves glibc's dynamic thresholds as each process finds them.
MALLOC_ENV = "PINGPONG_MALLOC"
MALLOC_MODES = ("settled", "as-is")
DEFAULT_MALLOC = "settled"
GLIBC_TUNABLES_ENV = "GLIBC_TUNABLES"
# A measurement switch, not a setting: cpp-websocketpp starts and joins one thread before it serves, so a one-thread
# server runs as a process with threads does (benchmarks/thread_tax.py). Servers inherit it from the orchestrator,
# and each run's environment records it (MEASUREMENT_SWITCHES).
CPP_LEAVE_SINGLE_THREADED_ENV = "PINGPONG_CPP_LEAVE_SINGLE_THREADED"
# A measurement switch too: with "1", the orchestrator starts every server and client with the kernel's address
# randomization off (personality ADDR_NO_RANDOMIZE, as `setarch -R` does), so two processes of one binary map its code
# at the same addresses (benchmarks/address_layout.py; docs/methodology.md, "The address layout on one CPU").
FIXED_ADDRESS_LAYOUT_ENV = "PINGPONG_FIXED_ADDRESS_LAYOUT"
# Retired (RETIRED_SWITCHES): with "1", each attempt on one CPU probed the host with its sentinel before and after
# the window, and an attempt whose probe ran slow was set aside (status HOST_SLOW_STATUS) and measured again.
HOST_PROBE_ENV = "PINGPONG_HOST_PROBE"
# A measurement switch too: with "1", the measured windows run without the host sentinel's slices inside them (the
# in-window pace, harness/measure/pacer.py), as every window did before: raw rates only, nothing paused.
RAW_WINDOWS_ENV = "PINGPONG_RAW_WINDOWS"
# A measurement switch too: with "1", every window counts each side's threads woken, woken from another CPU and
# moved (harness/system/wakeup_trace.py); each event costs the woken side about a µs (benchmarks/wakeup_counting.py).
COUNT_WAKEUPS_ENV = "PINGPONG_COUNT_WAKEUPS"
MEASUREMENT_SWITCHES = (CPP_LEAVE_SINGLE_THREADED_ENV, FIXED_ADDRESS_LAYOUT_ENV, RAW_WINDOWS_ENV, COUNT_WAKEUPS_ENV)
# Switches that measure nothing any more, and why: one set to "1" is refused rather than left off without a word.
RETIRED_SWITCHES = {HOST_PROBE_ENV: "the host's pace is measured inside every window now (docs/methodology.md, "
                                    "\"The host's pace in the window\")"}
# Above every read buffer of every runtime here (asyncio's 256 KiB, libuv's 64 KiB): served from the heap, never
# mapped per read; and a free heap top kept up to 64 MiB instead of returned to the kernel and faulted back in.
SETTLED_MALLOC_TUNABLES = ("glibc.malloc.mmap_threshold=4194304", "glibc.malloc.trim_threshold=67108864")

# The lines on those fds, each ended by a newline. With START_FD_ENV set, a client first writes ARMED_EVENT once it
# is loaded and blocks until it reads GO_LINE on START_FD_ENV (end of file instead: it exits 0 at once, without a
# report or a connection). A client writes READY_EVENT once every connection is open (then, if GO_FD_ENV is set,
# blocks until it reads GO_LINE there; end of file instead means: give up), and WINDOW_START_EVENT and
# WINDOW_END_EVENT when its measured window opens and closes.
ARMED_EVENT = "armed"
READY_EVENT = "ready"
WINDOW_START_EVENT = "window-start"
WINDOW_END_EVENT = "window-end"
GO_LINE = "go"

# HdrHistogram range of the latency histograms every client reports: 1 ns .. 60 s at 3 significant digits.
HISTOGRAM_LOWEST_NS = 1
HISTOGRAM_HIGHEST_NS = 60 * 10**9
HISTOGRAM_SIGNIFICANT_DIGITS = 3

# Versions of the JSON a client prints on stdout and a server writes to INFO_FILE_ENV.
CLIENT_REPORT_FORMAT_VERSION = 1
SERVER_REPORT_FORMAT_VERSION = 1

# The settings every report carries under "settings", by these names; an implementation adds its library's own.
COMPRESSION_SETTING = "compression"  # the --compression it was asked for
TLS_SETTING = "tls"  # whether it speaks wss:// / TLS
COMPRESSION_OFFERED_SETTING = "compression_offered"  # client: whether it offers permessage-deflate
COMPRESSION_EFFECTIVE_SETTING = "compression_effective"  # server: what it passes its library for permessage-deflate
MALLOC_SETTING = "malloc"  # Python programs: the MALLOC_MODES value they ran with (pingpong/kit/allocator.py)
# Names that reports written before the vocabulary was settled used for COMPRESSION_OFFERED_SETTING.
FORMER_SETTING_NAMES = {"per_message_deflate_offered": COMPRESSION_OFFERED_SETTING,
                        "permessage_deflate": COMPRESSION_OFFERED_SETTING}
