/* The C floor: the ping-pong relay over plain TCP with epoll, TCP_NODELAY on every connection.
 *
 * Wire format (pingpong/kit/raw_tcp.py): frames of a 4-byte big-endian length and a payload. A connection's first
 * frame names its room and is answered with an empty frame; every later frame is relayed verbatim to the other
 * members of the room. Usage: raw_tcp_server --host H --port P [--loop auto] [--compression default|off]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
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

#define MAX_FDS 65536
#define MAX_FRAME (64u * 1024 * 1024)
#define MAX_ROOMS 4096

struct buffer { char *data; size_t length, capacity; };
struct connection { int fd; int room; struct buffer in, out; };

static struct connection *connections[MAX_FDS];
static int highest_fd = -1; /* relaying scans connections[0..highest_fd], not all MAX_FDS slots */
static char *room_names[MAX_ROOMS];
static int room_count;
static int epoll_fd;
static volatile sig_atomic_t stopping;

static void on_signal(int number) { (void)number; stopping = 1; }

static void die(const char *what) { perror(what); exit(1); }

static void append(struct buffer *buffer, const char *data, size_t length) {
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
    free(c);
}

static void watch(struct connection *c, uint32_t events) {
    struct epoll_event event = {.events = events, .data.fd = c->fd};
    epoll_ctl(epoll_fd, EPOLL_CTL_MOD, c->fd, &event);
}

/* Write now if nothing is queued; queue the rest and wait for EPOLLOUT when the socket is full. */
static int send_or_queue(struct connection *c, const char *data, size_t length) {
    if (c->out.length == 0) {
        ssize_t written = send(c->fd, data, length, MSG_NOSIGNAL);
        if (written < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
            written = 0;
        }
        data += written;
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
    if (c->out.length == 0) watch(c, EPOLLIN);
    return 0;
}

static int room_id(const char *name, size_t length) {
    for (int i = 0; i < room_count; i++)
        if (strlen(room_names[i]) == length && memcmp(room_names[i], name, length) == 0) return i;
    if (room_count == MAX_ROOMS) return -1;
    room_names[room_count] = strndup(name, length);
    return room_count++;
}

/* Parse every complete frame in the input buffer; returns -1 when the connection must close. */
static int handle_input(struct connection *c) {
    size_t offset = 0;
    while (c->in.length - offset >= 4) {
        uint32_t length;
        memcpy(&length, c->in.data + offset, 4);
        length = ntohl(length);
        if (length > MAX_FRAME) return -1;
        if (c->in.length - offset < 4 + (size_t)length) break;
        const char *frame = c->in.data + offset;
        if (c->room < 0) {
            c->room = room_id(frame + 4, length);
            if (c->room < 0) return -1;
            static const char joined[4] = {0, 0, 0, 0};
            if (send_or_queue(c, joined, 4) < 0) return -1;
        } else {
            for (int fd = 0; fd <= highest_fd; fd++) {
                struct connection *other = connections[fd];
                if (other && other != c && other->room == c->room)
                    if (send_or_queue(other, frame, 4 + (size_t)length) < 0) close_connection(other);
            }
        }
        offset += 4 + (size_t)length;
    }
    memmove(c->in.data, c->in.data + offset, c->in.length - offset);
    c->in.length -= offset;
    return 0;
}

static void write_info(const char *host, const char *loop_requested) {
    const char *path = getenv("PINGPONG_INFO_FILE");
    if (!path) return;
    char temporary[4096];
    snprintf(temporary, sizeof temporary, "%s.%d.tmp", path, (int)getpid());
    FILE *file = fopen(temporary, "w");
    if (!file) return;
    fprintf(file, "{\"format_version\": 1, \"role\": \"server\", \"implementation\": \"raw-tcp-c\", \"pid\": %d, "
                  "\"runtime\": {\"name\": \"c\", \"version\": \"%s\"}, \"libraries\": {}, "
                  "\"loop_requested\": \"%s\", \"loop\": \"epoll\", \"settings\": {\"tcp_nodelay\": true, "
                  "\"framing\": \"u32 length\", \"host\": \"%s\"}}",
            (int)getpid(), __VERSION__, loop_requested, host);
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
        else { fprintf(stderr, "raw_tcp_server: unknown option %s\n", argv[i]); return 2; }
    }
    if (argc % 2 == 0 || port < 0 || port > 65535 || strcmp(loop, "auto") || !strcmp(compression, "on")) {
        fprintf(stderr, "usage: raw_tcp_server --host H --port P [--loop auto] [--compression default|off]\n");
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
    if (inet_pton(AF_INET, host, &address.sin_addr) != 1) { fprintf(stderr, "raw_tcp_server: bad host %s\n", host); return 2; }
    if (bind(listener, (struct sockaddr *)&address, sizeof address) < 0) die("bind");
    if (listen(listener, 128) < 0) die("listen");
    epoll_fd = epoll_create1(0);
    struct epoll_event event = {.events = EPOLLIN, .data.fd = listener};
    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listener, &event);
    write_info(host, loop);
    fprintf(stderr, "raw TCP C server listening on %s:%ld\n", host, port);

    struct epoll_event events[64];
    char chunk[65536];
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
                if (received > 0) {
                    append(&c->in, chunk, (size_t)received);
                    if (handle_input(c) < 0) close_connection(c);
                }
            }
        }
    }
    for (int fd = highest_fd; fd >= 0; fd--)
        if (connections[fd]) close_connection(connections[fd]);
    close(listener);
    return 0;
}
