/* The protocol floor's server: the ping-pong relay over RFC 6455 WebSocket in C with no library, epoll and
 * TCP_NODELAY as the raw-TCP C floor (native/raw_tcp_server.c), whose structure it keeps.
 *
 * It checks the opening handshake (GET, HTTP/1.1, Host, Upgrade: websocket, Connection: Upgrade, version 13, a key
 * of 16 bytes in base64) and answers 101 with Sec-WebSocket-Accept, or 400 (426 for another version) and closes.
 * The path without its query names the room. It offers no extension, so it refuses permessage-deflate. Every frame
 * it reads is checked (RSV bits, opcode, mask bit, lengths, control frames, continuation order, UTF-8 of text);
 * a bad one is answered with a close frame (1002, 1007 or 1009) and the connection closed. Whole messages, however
 * fragmented, go to the other members of the room as one unmasked frame of the same type; a ping is answered with
 * a pong, a close with a close. Usage: ws_floor_server --host H --port P [--loop auto] [--compression default|off]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ws_floor.h"

#define MAX_FDS 65536
#define MAX_ROOMS 4096
#define MAX_HEAD 8192

struct buffer { unsigned char *data; size_t length, capacity; };
struct connection {
    int fd, room, closing; /* room -1 until the handshake; closing: close once the queued bytes are out */
    int message_opcode;    /* the data opcode of the fragmented message in progress, or 0 */
    struct buffer in, out, message;
};

static struct connection *connections[MAX_FDS];
static int highest_fd = -1; /* relaying scans connections[0..highest_fd], not all MAX_FDS slots */
static char *room_names[MAX_ROOMS];
static int room_count;
static int epoll_fd;
static volatile sig_atomic_t stopping;

static void on_signal(int number) { (void)number; stopping = 1; }

static void die(const char *what) { perror(what); exit(1); }

static void append(struct buffer *buffer, const void *data, size_t length) {
    if (buffer->length + length > buffer->capacity) {
        size_t capacity = buffer->capacity ? buffer->capacity : 4096;
        while (capacity < buffer->length + length) capacity *= 2;
        buffer->data = realloc(buffer->data, capacity);
        if (!buffer->data) die("realloc");
        buffer->capacity = capacity;
    }
    memcpy(buffer->data + buffer->length, data, length);
    buffer->length += length;
}

static void close_connection(struct connection *c) {
    epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    connections[c->fd] = NULL;
    while (highest_fd >= 0 && !connections[highest_fd]) highest_fd--;
    free(c->in.data);
    free(c->out.data);
    free(c->message.data);
    free(c);
}

static void watch(struct connection *c, uint32_t events) {
    struct epoll_event event = {.events = events, .data.fd = c->fd};
    epoll_ctl(epoll_fd, EPOLL_CTL_MOD, c->fd, &event);
}

/* Write now if nothing is queued; queue the rest and wait for EPOLLOUT when the socket is full. */
static int send_or_queue(struct connection *c, const void *data, size_t length) {
    if (c->closing) return 0; /* nothing after our close frame */
    if (c->out.length == 0) {
        ssize_t written = send(c->fd, data, length, MSG_NOSIGNAL);
        if (written < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
            written = 0;
        }
        data = (const char *)data + written;
        length -= (size_t)written;
        if (length == 0) return 0;
        watch(c, EPOLLIN | EPOLLOUT);
    }
    append(&c->out, data, length);
    return 0;
}

static int flush(struct connection *c) {
    size_t done = 0;
    while (done < c->out.length) {
        ssize_t written = send(c->fd, c->out.data + done, c->out.length - done, MSG_NOSIGNAL);
        if (written < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            return -1;
        }
        done += (size_t)written;
    }
    memmove(c->out.data, c->out.data + done, c->out.length - done);
    c->out.length -= done;
    if (c->out.length == 0) {
        if (c->closing) return -1; /* our close frame is out: the server ends the TCP connection (RFC 6455 7.1.1) */
        watch(c, EPOLLIN);
    }
    return 0;
}

/* One unmasked frame of a whole message (FIN set), header and payload in one send. */
static int send_frame(struct connection *c, int opcode, const unsigned char *payload, size_t length) {
    unsigned char header[14];
    size_t n = frame_header(header, opcode, length, NULL);
    if (c->out.length == 0 && length <= 4096) {
        unsigned char frame[14 + 4096];
        memcpy(frame, header, n);
        memcpy(frame + n, payload, length);
        return send_or_queue(c, frame, n + length);
    }
    if (send_or_queue(c, header, n) < 0) return -1;
    return send_or_queue(c, payload, length);
}

/* Sends a close frame with a code (and an optional reason), then closes once it is out; -1 to close at once. */
static int send_close(struct connection *c, unsigned code, const char *reason) {
    unsigned char payload[125] = {(unsigned char)(code >> 8), (unsigned char)code};
    size_t length = 2 + (reason ? strnlen(reason, 123) : 0);
    if (reason) memcpy(payload + 2, reason, length - 2);
    if (send_frame(c, WS_CLOSE, payload, length) < 0) return -1;
    c->closing = 1;
    return c->out.length ? 0 : -1;
}

static int room_id(const char *name, size_t length) {
    for (int i = 0; i < room_count; i++)
        if (strlen(room_names[i]) == length && memcmp(room_names[i], name, length) == 0) return i;
    if (room_count == MAX_ROOMS) return -1;
    room_names[room_count] = strndup(name, length);
    return room_count++;
}

static int refuse(struct connection *c, const char *status, const char *why) {
    char response[512];
    int n = snprintf(response, sizeof response, "HTTP/1.1 %s\r\nConnection: close\r\n%sContent-Type: text/plain\r\n"
                     "Content-Length: %zu\r\n\r\n%s", status,
                     strncmp(status, "426", 3) ? "" : "Sec-WebSocket-Version: 13\r\n", strlen(why), why);
    send_or_queue(c, response, (size_t)n);
    fprintf(stderr, "ws floor server: refused a handshake: %s\n", why);
    c->closing = 1;
    return c->out.length ? 0 : -1;
}

/* The opening handshake: the head is whole (it ends in CRLF CRLF). Returns -1 when the connection must close. */
static int handshake(struct connection *c, char *head) {
    size_t length, path_length = 0, key_length = 0, version_length = 0;
    const char *value, *path = NULL, *key, *version;
    if (!strncmp(head, "GET ", 4)) {
        path = head + 4;
        path_length = strcspn(path, " \r");
    }
    if (!path || *path != '/' || strncmp(path + path_length, " HTTP/1.1\r\n", 11))
        return refuse(c, "400 Bad Request", "not a GET of a path over HTTP/1.1");
    if (!header_value(head, "Host", &length)) return refuse(c, "400 Bad Request", "no Host header");
    if (!(value = header_value(head, "Upgrade", &length)) || !has_token(value, length, "websocket"))
        return refuse(c, "400 Bad Request", "no Upgrade: websocket");
    if (!(value = header_value(head, "Connection", &length)) || !has_token(value, length, "upgrade"))
        return refuse(c, "400 Bad Request", "no Connection: Upgrade");
    version = header_value(head, "Sec-WebSocket-Version", &version_length);
    if (!version || version_length != 2 || strncmp(version, "13", 2))
        return refuse(c, "426 Upgrade Required", "Sec-WebSocket-Version is not 13");
    key = header_value(head, "Sec-WebSocket-Key", &key_length);
    if (!key || key_length != 24 || key[22] != '=' || key[23] != '=' ||
        strspn(key, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") != 22)
        return refuse(c, "400 Bad Request", "Sec-WebSocket-Key is not 16 bytes in base64");
    size_t room_length = strcspn(path, "? \r");
    c->room = room_id(path, room_length);
    if (c->room < 0) return refuse(c, "503 Service Unavailable", "too many rooms");
    char accept[29], response[160];
    accept_key(key, key_length, accept);
    int n = snprintf(response, sizeof response, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", accept);
    return send_or_queue(c, response, (size_t)n);
}

/* A whole message from c: to every other member of its room, as one frame of the same type. */
static void relay(struct connection *c, int opcode, const unsigned char *payload, size_t length) {
    unsigned char header[14];
    size_t n = frame_header(header, opcode, length, NULL);
    unsigned char small[14 + 4096], *frame = length <= 4096 ? small : malloc(n + length);
    if (!frame) die("malloc");
    memcpy(frame, header, n);
    memcpy(frame + n, payload, length);
    for (int fd = 0; fd <= highest_fd; fd++) {
        struct connection *other = connections[fd];
        if (other && other != c && other->room == c->room && send_or_queue(other, frame, n + length) < 0)
            close_connection(other);
    }
    if (frame != small) free(frame);
}

/* Every whole frame in the input buffer; returns -1 when the connection must close now. */
static int handle_frames(struct connection *c) {
    size_t offset = 0;
    int result = 0;
    while (!c->closing) {
        struct frame f;
        const char *problem = NULL;
        int header = parse_frame_header(c->in.data + offset, c->in.length - offset, 1, &f, &problem);
        if (header < 0) { result = send_close(c, 1002, problem); break; }
        if (header == 0 || c->in.length - offset - (size_t)header < f.length) break;
        unsigned char *payload = c->in.data + offset + header;
        apply_mask(payload, f.length, f.mask, 0);
        offset += (size_t)header + f.length;
        if (f.opcode == WS_PING) {
            if (send_frame(c, WS_PONG, payload, f.length) < 0) return -1;
        } else if (f.opcode == WS_PONG) {
            continue;
        } else if (f.opcode == WS_CLOSE) {
            unsigned code = f.length >= 2 ? (unsigned)payload[0] << 8 | payload[1] : 1000;
            int bad = f.length == 1 || (f.length >= 2 && (code < 1000 || (code >= 1004 && code <= 1006) ||
                                                          (code >= 1015 && code < 3000) || code >= 5000));
            if (!bad && f.length > 2 && !valid_utf8(payload + 2, f.length - 2)) bad = 1;
            result = bad ? send_close(c, 1002, "bad close frame") : send_close(c, code, NULL);
        } else if ((f.opcode == WS_CONTINUATION) != (c->message_opcode != 0)) {
            result = send_close(c, 1002, f.opcode ? "a new message inside a fragmented one" : "nothing to continue");
        } else if (f.fin && !c->message_opcode) { /* a whole message in one frame: the common case, not copied */
            if (f.opcode == WS_TEXT && !valid_utf8(payload, f.length)) result = send_close(c, 1007, "invalid UTF-8");
            else relay(c, f.opcode, payload, f.length);
        } else {
            if (f.opcode) c->message_opcode = f.opcode;
            if (c->message.length + f.length > WS_MAX_MESSAGE) { result = send_close(c, 1009, "too big"); break; }
            append(&c->message, payload, f.length);
            if (!f.fin) continue;
            if (c->message_opcode == WS_TEXT && !valid_utf8(c->message.data, c->message.length))
                result = send_close(c, 1007, "invalid UTF-8");
            else relay(c, c->message_opcode, c->message.data, c->message.length);
            c->message.length = 0;
            c->message_opcode = 0;
        }
        if (result < 0) return -1;
    }
    memmove(c->in.data, c->in.data + offset, c->in.length - offset);
    c->in.length -= offset;
    return result;
}

static int handle_input(struct connection *c) {
    if (c->room >= 0) return handle_frames(c);
    if (c->closing) return 0;
    append(&c->in, "", 1); /* a terminating NUL for the string functions, not counted */
    c->in.length--;
    char *end = strstr((char *)c->in.data, "\r\n\r\n");
    if (!end) return c->in.length > MAX_HEAD ? refuse(c, "431 Request Header Fields Too Large", "head too long") : 0;
    size_t head_length = (size_t)(end - (char *)c->in.data) + 4;
    end[2] = 0; /* the head as a string: its lines, each ending in CRLF */
    if (handshake(c, (char *)c->in.data) < 0) return -1;
    memmove(c->in.data, c->in.data + head_length, c->in.length - head_length);
    c->in.length -= head_length;
    return c->room >= 0 && !c->closing ? handle_frames(c) : 0;
}

static void write_info(const char *host, const char *loop_requested, const char *compression) {
    const char *path = getenv("PINGPONG_INFO_FILE");
    if (!path) return;
    char temporary[4096];
    snprintf(temporary, sizeof temporary, "%s.%d.tmp", path, (int)getpid());
    FILE *file = fopen(temporary, "w");
    if (!file) return;
    fprintf(file, "{\"format_version\": 1, \"role\": \"server\", \"implementation\": \"c-ws-floor\", \"pid\": %d, "
                  "\"runtime\": {\"name\": \"c\", \"version\": \"%s\"}, \"libraries\": {}, "
                  "\"loop_requested\": \"%s\", \"loop\": \"epoll\", \"settings\": {\"compression\": \"%s\", "
                  "\"compression_effective\": false, \"tls\": false, \"tcp_nodelay\": true, "
                  "\"framing\": \"RFC 6455\", \"host\": \"%s\"}}",
            (int)getpid(), __VERSION__, loop_requested, compression, host);
    fclose(file);
    rename(temporary, path);
}

int main(int argc, char **argv) {
    const char *host = "127.0.0.1", *loop = "auto", *compression = "default";
    long port = -1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--host")) host = argv[i + 1];
        else if (!strcmp(argv[i], "--port")) port = strtol(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--loop")) loop = argv[i + 1];
        else if (!strcmp(argv[i], "--compression")) compression = argv[i + 1];
        else { fprintf(stderr, "ws_floor_server: unknown option %s (no TLS, no workers)\n", argv[i]); return 2; }
    }
    const char *problem = argc % 2 == 0 ? "every option needs a value" : port < 0 || port > 65535
                          ? "--port P (0-65535) is required" : NULL;
    char text[256];
    if (!problem && strcmp(loop, "auto"))
        snprintf(text, sizeof text, "--loop %s is not supported (only auto: epoll)", loop), problem = text;
    if (!problem && strcmp(compression, "default") && strcmp(compression, "off"))
        snprintf(text, sizeof text, "--compression %s is not supported (no permessage-deflate)", compression),
            problem = text;
    if (problem) {
        fprintf(stderr, "ws_floor_server: %s; usage: ws_floor_server --host H --port P [--loop auto] "
                        "[--compression default|off]\n", problem);
        return 2;
    }
    struct sigaction action = {.sa_handler = on_signal};
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGINT, &action, NULL);
    signal(SIGPIPE, SIG_IGN);

    int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &address.sin_addr) != 1) {
        fprintf(stderr, "ws_floor_server: bad host %s\n", host);
        return 2;
    }
    if (bind(listener, (struct sockaddr *)&address, sizeof address) < 0) die("bind");
    if (listen(listener, 128) < 0) die("listen");
    epoll_fd = epoll_create1(0);
    struct epoll_event event = {.events = EPOLLIN, .data.fd = listener};
    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listener, &event);
    write_info(host, loop, compression);
    fprintf(stderr, "WebSocket protocol floor (C) server listening on %s:%ld\n", host, port);

    struct epoll_event events[64];
    unsigned char chunk[65536];
    while (!stopping) {
        int ready = epoll_wait(epoll_fd, events, 64, -1);
        if (ready < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        for (int i = 0; i < ready; i++) {
            int fd = events[i].data.fd;
            if (fd == listener) {
                int client;
                while ((client = accept4(listener, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    if (client >= MAX_FDS) { close(client); continue; }
                    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    struct connection *c = calloc(1, sizeof *c);
                    c->fd = client;
                    c->room = -1;
                    connections[client] = c;
                    if (client > highest_fd) highest_fd = client;
                    struct epoll_event client_event = {.events = EPOLLIN, .data.fd = client};
                    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, client, &client_event);
                }
                continue;
            }
            struct connection *c = connections[fd];
            if (!c) continue;
            if (events[i].events & EPOLLOUT && flush(c) < 0) { close_connection(c); continue; }
            if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                ssize_t received = recv(fd, chunk, sizeof chunk, 0);
                if (received == 0 || (received < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
                    close_connection(c);
                    continue;
                }
                if (received > 0 && !c->closing) {
                    append(&c->in, chunk, (size_t)received);
                    if (handle_input(c) < 0) close_connection(c);
                }
            }
        }
    }
    for (int fd = highest_fd; fd >= 0; fd--) /* going away (1001), best effort, then closed */
        if (connections[fd]) {
            if (connections[fd]->room >= 0) send_close(connections[fd], 1001, NULL);
            close_connection(connections[fd]);
        }
    close(listener);
    return 0;
}
