/* The pauses of a measured window, as the compiled clients count them (docs/contract.md, the report's "pauses"):
 * the measured cell is kept off its CPU while the host sentinel is timed there (the sentinel takes the CPU, or stops
 * the cell with SIGSTOP), then sent a SIGCONT. Each SIGCONT is counted, and a roundtrip that a pause may have
 * touched still counts as a roundtrip but its latency is not recorded. Included by native/floor_client.h (the C floors) and native/cpp/client_support.hpp
 * (the C++ clients); the Rust client keeps the same rule in its own words. The Go client's count comes late (a
 * goroutine keeps it), so it drops the slowest roundtrip it holds per pause instead. Everything is static.
 */
#pragma once
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* SIGCONTs received since count_pauses(); added to and read atomically: safe in a handler, and read from other
 * threads (cpprestsdk's) without a race. */
static uint64_t pauses_continued;

static void count_continue(int signal_number) {
    (void)signal_number;
    __atomic_fetch_add(&pauses_continued, 1, __ATOMIC_RELAXED);
}

/* The count now: one relaxed load, no system call. */
static inline uint64_t continued_now(void) { return __atomic_load_n(&pauses_continued, __ATOMIC_RELAXED); }

/* Counts every SIGCONT from now on. SA_RESTART resumes most blocking calls the handler interrupts; a read on a socket
 * with a timeout (SO_RCVTIMEO) and epoll_wait still fail with EINTR, as they may after a stop and continue with no
 * handler at all (man 7 signal), and their callers retry. */
static void count_pauses(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = count_continue;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGCONT, &action, NULL);
}

/* One pair's latencies through its window, by the rule every compiled client keeps: with c_k the count read at
 * roundtrip k's end, just before its end timestamp is taken (c_0: just before the first roundtrip's start),
 * roundtrip k's latency is recorded iff c_{k+1} == c_{k-1}, and the window's last roundtrip K's iff
 * c_K == c_{K-1}; otherwise it is dropped. Read before the timestamp, a count that a handler takes at once misses
 * no pause between a roundtrip's start and its end timestamp (read after it, it would miss one that fell between
 * the previous end's timestamp and that read). A pause drops the roundtrip it fell in and a neighbour; a count
 * that comes a roundtrip late (Go's goroutine) still drops the paused one. */
struct pause_filter {
    uint64_t before, after; /* c_{k-1} and c_k, around the held roundtrip k */
    uint64_t held;          /* roundtrip k's latency, held until roundtrip k+1 ends */
    int holding;
    size_t dropped; /* latencies not recorded */
};

static void pause_filter_open(struct pause_filter *filter, uint64_t seen) {
    memset(filter, 0, sizeof *filter);
    filter->after = seen;
}

/* The next roundtrip ended, its latency measured and the count `seen` read at its end; 1 when the roundtrip before
 * it is to be recorded (its latency in *kept), 0 when there is none or it is dropped. */
static int pause_filter_next(struct pause_filter *filter, uint64_t latency, uint64_t seen, uint64_t *kept) {
    int keep = filter->holding && seen == filter->before;
    if (keep) *kept = filter->held;
    else if (filter->holding) filter->dropped++;
    filter->before = filter->after;
    filter->after = seen;
    filter->held = latency;
    filter->holding = 1;
    return keep;
}

/* The window ended: 1 when its last roundtrip is to be recorded (its latency in *kept). */
static int pause_filter_close(struct pause_filter *filter, uint64_t *kept) {
    int keep = filter->holding && filter->after == filter->before;
    if (keep) *kept = filter->held;
    else if (filter->holding) filter->dropped++;
    filter->holding = 0;
    return keep;
}
