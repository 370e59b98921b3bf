/* The protocol floor's client driver: two blocking TCP connections in one room speaking RFC 6455 WebSocket in C
 * with no library, the same ping-pong, timing and report as the raw-TCP C floor (native/raw_tcp_client.c), whose
 * structure it keeps. Payloads mirror pingpong/kit/payloads.py byte for byte.
 *
 * The opening handshake sends a random 16-byte key and checks the answer: 101, Upgrade: websocket, Connection:
 * Upgrade, the Sec-WebSocket-Accept of its key, and no extension or subprotocol (it offered none). Every frame it
 * sends is masked with a new key (xorshift seeded from getrandom: RFC 6455 10.3 asks for keys a peer cannot
 * predict, not for a cryptographic source per frame); every frame it reads is checked (RSV bits, opcode, no mask,
 * lengths, control frames, continuation order); fragments are joined, a ping answered, a close fails the run.
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
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "floor_client.h"
#include "ws_floor.h"

static uint64_t mask_state;

/* A connection: its socket and what it has read beyond the last frame. */
struct member { int fd; unsigned char in[65536]; size_t start, end; };

static void random_bytes(void *out, size_t length) {
    if (getrandom(out, length, 0) != (ssize_t)length) { perror("getrandom"); exit(1); }
}

/* A new masking key: xorshift64*, seeded from getrandom. */
static void new_mask(unsigned char mask[4]) {
    mask_state ^= mask_state >> 12, mask_state ^= mask_state << 25, mask_state ^= mask_state >> 27;
    uint32_t value = (uint32_t)((mask_state * 2685821657736338717ull) >> 32);
    memcpy(mask, &value, 4);
}

/* The ping (which=0) or pong (which=1) payload of exactly size bytes; see pingpong/kit/payloads.py. */
static int write_all(int fd, const void *data, size_t length) {
    while (length) {
        ssize_t written = send(fd, data, length, MSG_NOSIGNAL);
        if (written < 0) {
            if (errno == EINTR) continue;
            snprintf(error_message, sizeof error_message, "send failed: %s", strerror(errno));
            return -1;
        }
        data = (const char *)data + written;
        length -= (size_t)written;
    }
    return 0;
}

/* At least `wanted` bytes buffered from m->start, reading as needed; -1 with error_message on failure. */
static int fill(struct member *m, size_t wanted, double stall_timeout) {
    if (m->end - m->start >= wanted) return 0;
    if (m->start) {
        memmove(m->in, m->in + m->start, m->end - m->start);
        m->end -= m->start;
        m->start = 0;
    }
    while (m->end < wanted) {
        ssize_t received = recv(m->fd, m->in + m->end, sizeof m->in - 1 - m->end, 0);
        if (received == 0) {
            snprintf(error_message, sizeof error_message, "connection closed by the server");
            return -1;
        }
        if (received < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                snprintf(error_message, sizeof error_message, "stall: no roundtrip completed for %g s",
                         stall_timeout);
            else
                snprintf(error_message, sizeof error_message, "receive failed: %s", strerror(errno));
            return -1;
        }
        m->end += (size_t)received;
    }
    return 0;
}

/* Copies `length` bytes of the stream into out (which may be larger than the buffer). */
static int read_exact(struct member *m, unsigned char *out, size_t length, double stall_timeout) {
    while (length) {
        if (m->end == m->start && fill(m, 1, stall_timeout) < 0) return -1;
        size_t n = m->end - m->start < length ? m->end - m->start : length;
        memcpy(out, m->in + m->start, n);
        m->start += n, out += n, length -= n;
    }
    return 0;
}

/* One masked frame, header and payload in one send; `frame` has room for 14 + length bytes. */
static int send_frame(int fd, int opcode, const void *payload, size_t length, unsigned char *frame) {
    unsigned char mask[4];
    new_mask(mask);
    size_t n = frame_header(frame, opcode, length, mask);
    memcpy(frame + n, payload, length);
    apply_mask(frame + n, length, mask, 0);
    return write_all(fd, frame, n + length);
}

/* Reads the next whole message (joining fragments, answering pings) into out, which holds `capacity` bytes;
 * returns its length and sets *opcode, or -1 with error_message set. */
static long read_message(struct member *m, int *opcode, unsigned char *out, size_t capacity, const char *who,
                         double stall) {
    size_t length = 0;
    *opcode = 0;
    for (;;) {
        struct frame f;
        const char *problem = NULL;
        int header;
        while ((header = parse_frame_header(m->in + m->start, m->end - m->start, 0, &f, &problem)) == 0)
            if (fill(m, m->end - m->start + 1, stall) < 0) return -1;
        if (header < 0) {
            snprintf(error_message, sizeof error_message, "protocol error on connection %s: %s", who, problem);
            return -1;
        }
        m->start += (size_t)header;
        if (f.opcode >= WS_CLOSE) {
            unsigned char control[125], frame[14 + 125];
            if (read_exact(m, control, f.length, stall) < 0) return -1;
            if (f.opcode == WS_PING && send_frame(m->fd, WS_PONG, control, f.length, frame) < 0) return -1;
            if (f.opcode == WS_CLOSE) {
                unsigned code = f.length >= 2 ? (unsigned)control[0] << 8 | control[1] : 1005;
                send_frame(m->fd, WS_CLOSE, control, f.length >= 2 ? 2 : 0, frame);
                snprintf(error_message, sizeof error_message, "connection %s closed by the server (close code %u)",
                         who, code);
                return -1;
            }
            continue;
        }
        if ((f.opcode == WS_CONTINUATION) != (*opcode != 0)) {
            snprintf(error_message, sizeof error_message, "protocol error on connection %s: %s", who,
                     f.opcode ? "a new message inside a fragmented one" : "nothing to continue");
            return -1;
        }
        if (f.opcode) *opcode = f.opcode;
        if (length + f.length > capacity) { /* longer than the payload it waits for: a mismatch, said below */
            snprintf(error_message, sizeof error_message, "payload mismatch: connection %s expected %zu bytes, "
                     "received a message of more", who, capacity);
            return -1;
        }
        if (read_exact(m, out + length, f.length, stall) < 0) return -1;
        length += f.length;
        if (f.fin) return (long)length;
    }
}

/* Reads one message and checks it is exactly `expected`, of the payload's type. */
static int expect_message(struct member *m, int opcode, const char *expected, size_t size, unsigned char *scratch,
                          const char *who, double stall) {
    int received_opcode;
    long length = read_message(m, &received_opcode, scratch, size, who, stall);
    if (length < 0) return -1;
    if (received_opcode == WS_TEXT && !valid_utf8(scratch, (size_t)length)) { /* RFC 6455 8.1: fail the connection */
        snprintf(error_message, sizeof error_message, "protocol error on connection %s: invalid UTF-8", who);
        return -1;
    }
    if (received_opcode != opcode || (size_t)length != size || memcmp(scratch, expected, size) != 0) {
        snprintf(error_message, sizeof error_message, "payload mismatch: connection %s expected %s of %zu bytes, "
                 "received %s of %ld bytes%s", who, opcode == WS_TEXT ? "text" : "binary", size,
                 received_opcode == WS_TEXT ? "text" : "binary", length,
                 received_opcode == opcode && (size_t)length == size ? " with other bytes" : "");
        return -1;
    }
    return 0;
}

/* Opens a connection and does the opening handshake; -1 with error_message on failure. */
static int open_member(struct member *m, const char *host, int port, const char *path, double stall_timeout) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    m->fd = fd, m->start = m->end = 0;
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, host, &address.sin_addr);
    if (connect(fd, (struct sockaddr *)&address, sizeof address) < 0) {
        snprintf(error_message, sizeof error_message, "cannot connect to %s:%d: %s", host, port, strerror(errno));
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval timeout = {.tv_sec = (long)stall_timeout,
                              .tv_usec = (long)((stall_timeout - (long)stall_timeout) * 1e6)};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    unsigned char nonce[16];
    char key[25], expected[29], request[1536];
    random_bytes(nonce, sizeof nonce);
    base64(nonce, sizeof nonce, key);
    accept_key(key, 24, expected);
    int n = snprintf(request, sizeof request, "GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n",
                     path, host, port, key);
    if (write_all(fd, request, (size_t)n) < 0) return -1;
    char *head = NULL, *end = NULL;
    while (!end) { /* the response's head, up to its blank line; what follows stays buffered */
        if (m->end == sizeof m->in - 1) {
            snprintf(error_message, sizeof error_message, "handshake: the response's head is too long");
            return -1;
        }
        if (fill(m, m->end + 1, stall_timeout) < 0) return -1;
        m->in[m->end] = 0;
        head = (char *)m->in;
        end = strstr(head, "\r\n\r\n");
    }
    end[2] = 0;
    m->start = (size_t)(end - head) + 4;
    const char *value, *problem = NULL;
    size_t length;
    if (strncmp(head, "HTTP/1.1 101 ", 13) && strncmp(head, "HTTP/1.1 101\r", 13)) problem = "status is not 101";
    else if (!(value = header_value(head, "Upgrade", &length)) || !has_token(value, length, "websocket"))
        problem = "no Upgrade: websocket";
    else if (!(value = header_value(head, "Connection", &length)) || !has_token(value, length, "upgrade"))
        problem = "no Connection: Upgrade";
    else if (!(value = header_value(head, "Sec-WebSocket-Accept", &length)) || length != 28 ||
             memcmp(value, expected, 28))
        problem = "Sec-WebSocket-Accept is not the key's";
    else if (header_value(head, "Sec-WebSocket-Extensions", &length))
        problem = "the server chose an extension the client did not offer";
    else if (header_value(head, "Sec-WebSocket-Protocol", &length))
        problem = "the server chose a subprotocol the client did not offer";
    if (problem) {
        snprintf(error_message, sizeof error_message, "handshake refused on %s:%d%s: %s (%.*s)", host, port, path,
                 problem, (int)strcspn(head, "\r"), head);
        return -1;
    }
    return fd;
}

/* The closing handshake at the end: a close frame (1000), then the server's close, for up to 1 s. */
static void close_member(struct member *m) {
    unsigned char frame[16], payload[2] = {1000 >> 8, 1000 & 255}, scratch[256];
    struct timeval timeout = {.tv_sec = 1};
    setsockopt(m->fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    if (send_frame(m->fd, WS_CLOSE, payload, 2, frame) == 0) {
        int opcode;
        read_message(m, &opcode, scratch, sizeof scratch, "", 1); /* returns -1 at the server's close */
    }
    close(m->fd);
}

static void emit(FILE *out, const char *kind, size_t size, const char *compression, int record) {
    fprintf(out, "{\"format_version\": 1, \"role\": \"client\", \"implementation\": \"c-ws-floor\", "
                 "\"runtime\": {\"name\": \"c\", \"version\": \"%s\"}, \"libraries\": {}, \"loop\": \"blocking\", "
                 "\"settings\": {\"compression\": \"%s\", \"compression_offered\": false, \"tls\": false, "
                 "\"tcp_nodelay\": true, \"framing\": \"RFC 6455\", \"latency_recorded\": %s}, "
                 "\"payload\": {\"kind\": \"%s\", \"size\": %zu}, \"workload\": \"pingpong\", \"pairs\": 1",
            __VERSION__, compression, record ? "true" : "false", kind, size);
}

/* One roundtrip: A sends the ping, B checks it and sends the pong, A checks it. */
static int roundtrip(struct member *a, struct member *b, int opcode, const char *ping, const char *pong, size_t size,
                     unsigned char *frame, unsigned char *scratch, double stall) {
    return send_frame(a->fd, opcode, ping, size, frame) < 0 ||
           expect_message(b, opcode, ping, size, scratch, "B", stall) < 0 ||
           send_frame(b->fd, opcode, pong, size, frame) < 0 ||
           expect_message(a, opcode, pong, size, scratch, "A", stall) < 0 ? -1 : 0;
}

int main(int argc, char **argv) {
    const char *url = NULL, *kind = "text-ascii", *compression = "default", *loop = "auto";
    double duration = 5, warmup = 1, stall_timeout = 10;
    long size = 4;
    int record = 1;
    for (int i = 1; i < argc; i++) {
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--no-latency")) { record = 0; continue; }
        if (!value) { fprintf(stderr, "ws_floor_client: %s needs a value\n", argv[i]); return 2; }
        if (!strcmp(argv[i], "--url")) url = value;
        else if (!strcmp(argv[i], "--duration")) duration = atof(value);
        else if (!strcmp(argv[i], "--warmup")) warmup = atof(value);
        else if (!strcmp(argv[i], "--loop")) loop = value;
        else if (!strcmp(argv[i], "--compression")) compression = value;
        else if (!strcmp(argv[i], "--payload-size")) size = strtol(value, NULL, 10);
        else if (!strcmp(argv[i], "--payload-kind")) kind = value;
        else if (!strcmp(argv[i], "--stall-timeout")) stall_timeout = atof(value);
        else {
            fprintf(stderr, "ws_floor_client: unknown option %s (one ping-pong pair over ws://, no TLS)\n", argv[i]);
            return 2;
        }
        i++;
    }
    char host[256] = {0}, room[1024] = "/";
    int port = 0;
    const char *problem = NULL;
    char text[256];
    if (!url || sscanf(url, "ws://%255[^:/]:%d%1023s", host, &port, room) < 2)
        problem = "--url ws://H:P/ROOM is required (no TLS)";
    else if (duration <= 0 || warmup < 0 || stall_timeout <= 0)
        problem = "--duration and --stall-timeout must be > 0, --warmup >= 0";
    else if (size < 1 || size > (long)WS_MAX_MESSAGE)
        problem = "--payload-size must be 1 to 64 MiB";
    else if (strcmp(kind, "text-ascii") && strcmp(kind, "text-utf8") && strcmp(kind, "binary"))
        problem = "--payload-kind must be text-ascii, text-utf8 or binary";
    else if (strcmp(loop, "auto"))
        snprintf(text, sizeof text, "--loop %s is not supported (only auto: blocking)", loop), problem = text;
    else if (strcmp(compression, "default") && strcmp(compression, "off"))
        snprintf(text, sizeof text, "--compression %s is not supported (no permessage-deflate)", compression),
            problem = text;
    if (problem) {
        fprintf(stderr, "ws_floor_client: %s; usage: ws_floor_client --url ws://H:P/ROOM --duration S --warmup W "
                        "[--payload-size N] [--payload-kind text-ascii|text-utf8|binary] [--compression default|off] "
                        "[--stall-timeout S] [--no-latency]\n", problem);
        return 2;
    }
    random_bytes(&mask_state, sizeof mask_state);
    mask_state |= 1;
    int opcode = strcmp(kind, "binary") ? WS_TEXT : WS_BINARY;
    char *ping = make_payload(kind, (size_t)size, 0), *pong = make_payload(kind, (size_t)size, 1);
    unsigned char *frame = malloc(14 + (size_t)size), *scratch = malloc((size_t)size);
    const char *events_fd_text = getenv("PINGPONG_EVENTS_FD");
    int events_fd = events_fd_text ? atoi(events_fd_text) : -1;
    const char *go_fd_text = getenv("PINGPONG_GO_FD");
    count_pauses();

    static struct member a, b;
    int failed = open_member(&a, host, port, room, stall_timeout) < 0 ||
                 open_member(&b, host, port, room, stall_timeout) < 0;
    size_t capacity = 1 << 16, count = 0, recorded = 0, warmup_count = 0;
    uint64_t *latencies = malloc(capacity * sizeof *latencies);
    uint64_t warmup_start = now_ns(), start = 0, end = 0, continued_at_start = 0, continued = 0, kept;
    struct pause_filter pauses = {0};
    double user_start = 0, system_start = 0, user_s = 0, system_s = 0;
    if (!failed) {
        emit_event(&events_fd, "ready\n");
        if (go_fd_text && wait_for_go(atoi(go_fd_text)) < 0) failed = 1;
        warmup_start = now_ns();
    }
    if (!failed) {
        uint64_t deadline = warmup_start + (uint64_t)(warmup * 1e9), t = warmup_start;
        while (t < deadline) {
            if (roundtrip(&a, &b, opcode, ping, pong, (size_t)size, frame, scratch, stall_timeout) < 0) {
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
            if (roundtrip(&a, &b, opcode, ping, pong, (size_t)size, frame, scratch, stall_timeout) < 0) {
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
        for (char *c = error_message; *c; c++)
            if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20) *c = '\'';
        printf(", \"error\": \"%s\", \"errors\": 1}\n", error_message[0] ? error_message : "failed");
        fprintf(stderr, "c-ws-floor client: %s\n", error_message);
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
    describe_socket(a.fd, a_details, sizeof a_details);
    describe_socket(b.fd, b_details, sizeof b_details);
    printf("]}, \"connections\": [{\"name\": \"A\", %s}, {\"name\": \"B\", %s}]}\n", a_details, b_details);
    fflush(stdout);
    close_member(&a);
    close_member(&b);
    return 0;
}
