/* What the C floors' clients (raw_tcp_client.c and ws_floor_client.c) share of the client contract
 * (docs/contract.md): the payloads (as pingpong/kit/payloads.py makes them), the clocks, a socket's description
 * for the report, the events pipe, the start barrier, the latencies kept (with native/pauses.h: none a pause
 * touched) and their rounding to the HdrHistogram precision. Each client includes it once; everything is static.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "pauses.h"

static const char *ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789";
static const char *UTF8_CYCLE[4] = {"a", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"};
static char error_message[512];

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static double cpu_seconds(int user) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    struct timeval t = user ? usage.ru_utime : usage.ru_stime;
    return (double)t.tv_sec + (double)t.tv_usec / 1e6;
}

/* The ping (which=0) or pong (which=1) payload of exactly size bytes; see pingpong/kit/payloads.py. */
static char *make_payload(const char *kind, size_t size, int which) {
    char *out = malloc(size);
    if (!strcmp(kind, "text-ascii")) {
        for (size_t i = 0; i < size; i++) out[i] = ALPHABET[(i + (size_t)which) % 36];
    } else if (!strcmp(kind, "binary")) {
        for (size_t i = 0; i < size; i++) out[i] = (char)((i * 31 + 7 + (size_t)which * 101) & 0xff);
    } else {
        size_t used = 0, index = (size_t)which;
        while (used < size) {
            const char *c = UTF8_CYCLE[index % 4];
            size_t width = strlen(c);
            if (used + width > size) { c = &ALPHABET[(index + (size_t)which) % 36]; width = 1; }
            memcpy(out + used, c, width);
            used += width;
            index++;
        }
    }
    return out;
}

static void describe_socket(int fd, char *out, size_t size) {
    struct sockaddr_in local, peer;
    socklen_t length = sizeof local;
    getsockname(fd, (struct sockaddr *)&local, &length);
    length = sizeof peer;
    getpeername(fd, (struct sockaddr *)&peer, &length);
    int nodelay = 0;
    socklen_t option_length = sizeof nodelay;
    getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, &option_length);
    char local_host[64], peer_host[64];
    inet_ntop(AF_INET, &local.sin_addr, local_host, sizeof local_host);
    inet_ntop(AF_INET, &peer.sin_addr, peer_host, sizeof peer_host);
    snprintf(out, size, "\"extensions\": null, \"subprotocol\": null, \"family\": \"ipv4\", "
             "\"local_address\": \"%s:%d\", \"peer_address\": \"%s:%d\", \"tcp_nodelay\": %s", local_host,
             ntohs(local.sin_port), peer_host, ntohs(peer.sin_port), nodelay ? "true" : "false");
}

/* A line to the orchestrator's events pipe (PINGPONG_EVENTS_FD); after a failed write, no more are tried. */
static void emit_event(int *events_fd, const char *line) {
    if (*events_fd >= 0 && write(*events_fd, line, strlen(line)) < 0) *events_fd = -1;
}

/* The start barrier (PINGPONG_GO_FD): block until the orchestrator writes "go\n"; -1 when it closes the pipe
 * without it (another client process failed or did not get ready). */
static int wait_for_go(int go_fd) {
    char line[16] = {0};
    size_t used = 0;
    while (used < sizeof line - 1) {
        ssize_t received = read(go_fd, line + used, 1);
        if (received < 0 && errno == EINTR) continue;
        if (received <= 0 || line[used] == '\n') break;
        used++;
    }
    close(go_fd);
    if (strncmp(line, "go\n", sizeof line) != 0) {
        snprintf(error_message, sizeof error_message, "start barrier: the orchestrator closed it without a go "
                 "(another client process failed or did not get ready)");
        return -1;
    }
    return 0;
}

/* One more recorded latency, the buffer grown as needed. */
static void keep_latency(uint64_t **latencies, size_t *recorded, size_t *capacity, uint64_t latency) {
    if (*recorded == *capacity) {
        *capacity *= 2;
        *latencies = realloc(*latencies, *capacity * sizeof **latencies);
    }
    (*latencies)[(*recorded)++] = latency;
}

static int compare_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t round_to_hdr_precision(uint64_t value) {
    int bits = 64 - __builtin_clzll(value | 1);
    int shift = bits > 11 ? bits - 11 : 0;
    return (value >> shift) << shift;
}
