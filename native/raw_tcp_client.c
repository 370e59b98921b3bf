/* The C floor's client driver: two blocking TCP connections in one room, the same ping-pong, timing and report
 * as the other drivers (README, "The contract"). Payloads mirror pingpong/kit/payloads.py byte for byte.
 * Latencies are reported as [value_ns, count] pairs rounded to 11 significant bits (HdrHistogram's precision at
 * 3 significant digits); the orchestrator folds them into an HdrHistogram. SIGCONTs are counted, and a roundtrip a
 * pause touched is not timed (native/pauses.h).
 */
#define _GNU_SOURCE
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

#include "floor_client.h"

static int write_all(int fd, const char *data, size_t length) {
    while (length) {
        ssize_t written = send(fd, data, length, MSG_NOSIGNAL);
        if (written < 0) { if (errno == EINTR) continue; return -1; }
        data += written;
        length -= (size_t)written;
    }
    return 0;
}

static int read_all(int fd, char *data, size_t length, double stall_timeout) {
    while (length) {
        ssize_t received = recv(fd, data, length, 0);
        if (received == 0) { snprintf(error_message, sizeof error_message, "connection closed by the server"); return -1; }
        if (received < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                snprintf(error_message, sizeof error_message, "stall: no roundtrip completed for %g s", stall_timeout);
            else
                snprintf(error_message, sizeof error_message, "receive failed: %s", strerror(errno));
            return -1;
        }
        data += received;
        length -= (size_t)received;
    }
    return 0;
}

/* Read one frame and check it is exactly `expected`. */
static int expect_frame(int fd, const char *expected, size_t size, char *scratch, const char *who, double stall) {
    uint32_t length;
    if (read_all(fd, (char *)&length, 4, stall) < 0) return -1;
    length = ntohl(length);
    if (length != size) {
        snprintf(error_message, sizeof error_message, "payload mismatch: connection %s expected %zu bytes, received %u",
                 who, size, length);
        return -1;
    }
    if (read_all(fd, scratch, size, stall) < 0) return -1;
    if (memcmp(scratch, expected, size) != 0) {
        snprintf(error_message, sizeof error_message, "payload mismatch: connection %s received other bytes", who);
        return -1;
    }
    return 0;
}

static int open_member(const char *host, int port, const char *room, double stall_timeout) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, host, &address.sin_addr);
    if (connect(fd, (struct sockaddr *)&address, sizeof address) < 0) {
        snprintf(error_message, sizeof error_message, "cannot connect to %s:%d: %s", host, port, strerror(errno));
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval timeout = {.tv_sec = (long)stall_timeout, .tv_usec = (long)((stall_timeout - (long)stall_timeout) * 1e6)};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    uint32_t length = htonl((uint32_t)strlen(room)), ack;
    if (write_all(fd, (char *)&length, 4) < 0 || write_all(fd, room, strlen(room)) < 0) return -1;
    if (read_all(fd, (char *)&ack, 4, stall_timeout) < 0 || ack != 0) {
        snprintf(error_message, sizeof error_message, "the server did not acknowledge joining the room");
        return -1;
    }
    return fd;
}

static void emit(FILE *out, const char *kind, size_t size, const char *compression, int record) {
    fprintf(out, "{\"format_version\": 1, \"role\": \"client\", \"implementation\": \"raw-tcp-c\", "
                 "\"runtime\": {\"name\": \"c\", \"version\": \"%s\"}, \"libraries\": {}, \"loop\": \"blocking\", "
                 "\"settings\": {\"compression\": \"%s\", \"tcp_nodelay\": true, \"framing\": \"u32 length\", "
                 "\"latency_recorded\": %s}, \"payload\": {\"kind\": \"%s\", \"size\": %zu}",
            __VERSION__, compression, record ? "true" : "false", kind, size);
}

int main(int argc, char **argv) {
    const char *url = NULL, *kind = "text-ascii", *compression = "default", *loop = "auto";
    double duration = 5, warmup = 1, stall_timeout = 10;
    long size = 4;
    int record = 1;
    for (int i = 1; i < argc; i++) {
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--no-latency")) { record = 0; continue; }
        if (!value) { fprintf(stderr, "raw_tcp_client: %s needs a value\n", argv[i]); return 2; }
        if (!strcmp(argv[i], "--url")) url = value;
        else if (!strcmp(argv[i], "--duration")) duration = atof(value);
        else if (!strcmp(argv[i], "--warmup")) warmup = atof(value);
        else if (!strcmp(argv[i], "--loop")) loop = value;
        else if (!strcmp(argv[i], "--compression")) compression = value;
        else if (!strcmp(argv[i], "--payload-size")) size = strtol(value, NULL, 10);
        else if (!strcmp(argv[i], "--payload-kind")) kind = value;
        else if (!strcmp(argv[i], "--stall-timeout")) stall_timeout = atof(value);
        else { fprintf(stderr, "raw_tcp_client: unknown option %s\n", argv[i]); return 2; }
        i++;
    }
    char host[256] = {0}, room[1024] = "/";
    int port = 0;
    if (!url || sscanf(url, "tcp://%255[^:]:%d%1023s", host, &port, room) < 2 || duration <= 0 || warmup < 0 ||
        size < 1 || stall_timeout <= 0 || strcmp(loop, "auto") || !strcmp(compression, "on") ||
        (strcmp(kind, "text-ascii") && strcmp(kind, "text-utf8") && strcmp(kind, "binary"))) {
        fprintf(stderr, "usage: raw_tcp_client --url tcp://H:P/ROOM --duration S --warmup W [--payload-size N] "
                        "[--payload-kind text-ascii|text-utf8|binary] [--stall-timeout S] [--no-latency]\n");
        return 2;
    }
    char *ping = make_payload(kind, (size_t)size, 0), *pong = make_payload(kind, (size_t)size, 1);
    char *ping_frame = malloc(4 + (size_t)size), *pong_frame = malloc(4 + (size_t)size), *scratch = malloc((size_t)size);
    uint32_t network_size = htonl((uint32_t)size);
    memcpy(ping_frame, &network_size, 4); memcpy(ping_frame + 4, ping, (size_t)size);
    memcpy(pong_frame, &network_size, 4); memcpy(pong_frame + 4, pong, (size_t)size);
    const char *events_fd_text = getenv("PINGPONG_EVENTS_FD");
    int events_fd = events_fd_text ? atoi(events_fd_text) : -1;
    const char *go_fd_text = getenv("PINGPONG_GO_FD");
    count_pauses();

    int a = open_member(host, port, room, stall_timeout);
    int b = a < 0 ? -1 : open_member(host, port, room, stall_timeout);
    size_t capacity = 1 << 16, count = 0, recorded = 0, warmup_count = 0;
    uint64_t *latencies = malloc(capacity * sizeof *latencies);
    uint64_t warmup_start = now_ns(), start = 0, end = 0, continued_at_start = 0, continued = 0, kept;
    struct pause_filter pauses = {0};
    double user_start = 0, system_start = 0, user_s = 0, system_s = 0;
    int failed = b < 0;
    if (!failed) {
        emit_event(&events_fd, "ready\n");
        if (go_fd_text && wait_for_go(atoi(go_fd_text)) < 0) failed = 1;
        warmup_start = now_ns();
    }
    if (!failed) {
        uint64_t deadline = warmup_start + (uint64_t)(warmup * 1e9), t = warmup_start;
        while (t < deadline) {
            if (write_all(a, ping_frame, 4 + (size_t)size) < 0 || expect_frame(b, ping, (size_t)size, scratch, "B", stall_timeout) < 0 ||
                write_all(b, pong_frame, 4 + (size_t)size) < 0 || expect_frame(a, pong, (size_t)size, scratch, "A", stall_timeout) < 0) {
                failed = 1;
                break;
            }
            warmup_count++;
            t = now_ns();
        }
    }
    if (!failed) {
        continued_at_start = continued_now(); /* before the event, on which the orchestrator may pause the cell */
        emit_event(&events_fd, "window-start\n");
        user_start = cpu_seconds(1);
        system_start = cpu_seconds(0);
        pause_filter_open(&pauses, continued_now());
        start = now_ns();
        uint64_t deadline = start + (uint64_t)(duration * 1e9), roundtrip_start = start;
        for (;;) {
            if (write_all(a, ping_frame, 4 + (size_t)size) < 0 || expect_frame(b, ping, (size_t)size, scratch, "B", stall_timeout) < 0 ||
                write_all(b, pong_frame, 4 + (size_t)size) < 0 || expect_frame(a, pong, (size_t)size, scratch, "A", stall_timeout) < 0) {
                failed = 1;
                break;
            }
            uint64_t seen = continued_now();
            end = now_ns();
            if (record && pause_filter_next(&pauses, end - roundtrip_start, seen, &kept))
                keep_latency(&latencies, &recorded, &capacity, kept);
            count++;
            roundtrip_start = end;
            if (end >= deadline) break;
        }
        continued = continued_now() - continued_at_start;
        if (record && pause_filter_close(&pauses, &kept)) keep_latency(&latencies, &recorded, &capacity, kept);
        user_s = cpu_seconds(1) - user_start;
        system_s = cpu_seconds(0) - system_start;
        emit_event(&events_fd, "window-end\n");
    }
    emit(stdout, kind, (size_t)size, compression, record);
    if (failed) {
        for (char *c = error_message; *c; c++) if (*c == '"' || *c == '\\') *c = '\'';
        printf(", \"error\": \"%s\", \"errors\": 1}\n", error_message[0] ? error_message : "failed");
        fprintf(stderr, "raw-tcp-c client: %s\n", error_message);
        return 1;
    }
    double elapsed = (double)(end - start) / 1e9;
    printf(", \"error\": null, \"errors\": 0, \"warmup\": {\"roundtrips\": %zu, \"elapsed_s\": %.9f}, "
           "\"roundtrips\": %zu, \"elapsed_s\": %.9f, \"roundtrips_per_s\": %.6f, "
           "\"cpu\": {\"user_s\": %.6f, \"system_s\": %.6f}, \"pauses\": {\"continued\": %llu, "
           "\"latency_dropped\": %zu}, \"latency\": {\"unit\": \"ns\", \"recorded\": %s, \"hdr_histogram\": null, "
           "\"value_counts\": [",
           warmup_count, (double)(start - warmup_start) / 1e9, count, elapsed, (double)count / elapsed, user_s,
           system_s, (unsigned long long)continued, pauses.dropped, record ? "true" : "false");
    if (record) {
        for (size_t i = 0; i < recorded; i++) latencies[i] = round_to_hdr_precision(latencies[i]);
        qsort(latencies, recorded, sizeof *latencies, compare_u64);
        for (size_t i = 0; i < recorded;) {
            size_t j = i;
            while (j < recorded && latencies[j] == latencies[i]) j++;
            printf("%s[%llu, %zu]", i ? ", " : "", (unsigned long long)latencies[i], j - i);
            i = j;
        }
    }
    char a_details[512], b_details[512];
    describe_socket(a, a_details, sizeof a_details);
    describe_socket(b, b_details, sizeof b_details);
    printf("]}, \"connections\": [{\"name\": \"A\", %s}, {\"name\": \"B\", %s}]}\n", a_details, b_details);
    close(a);
    close(b);
    return 0;
}
