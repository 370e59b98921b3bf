// What the C++ clients (client.cpp on websocketpp, cpprest_client.cpp on cpprestsdk) share of the client contract
// (docs/contract.md), with no library of theirs: the clock and CPU time, the payloads (as native/floor_client.h
// makes them), JSON text, latency rounding to the HdrHistogram precision, the events pipe and the go line of the
// start gate and barrier; and, from native/pauses.h as the C floors have it, the SIGCONTs counted and the latencies
// a pause touched left out. Each client includes it once; everything is static.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>

#include "../pauses.h"

static uint64_t now_ns() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return uint64_t(t.tv_sec) * 1000000000u + uint64_t(t.tv_nsec);
}

static void cpu_seconds(double &user, double &system) {
    rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    user = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6;
    system = usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6;
}

// The ping (which=0) or pong (which=1) payload of exactly size bytes, as make_payload() in native/floor_client.h.
static std::string make_payload(const std::string &kind, size_t size, int which) {
    static const char *alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
    static const char *utf8_cycle[4] = {"a", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"};
    std::string out;
    if (kind == "text-ascii") {
        for (size_t i = 0; i < size; i++) out += alphabet[(i + which) % 36];
    } else if (kind == "binary") {
        for (size_t i = 0; i < size; i++) out += char((i * 31 + 7 + which * 101) & 0xff);
    } else {
        for (size_t index = which; out.size() < size; index++) {
            std::string c = utf8_cycle[index % 4];
            if (out.size() + c.size() > size) c = alphabet[(index + which) % 36];
            out += c;
        }
    }
    return out;
}

static std::string json_string(const std::string &text) {
    std::string out = "\"";
    for (unsigned char c : text) {
        if (c == '"' || c == '\\') out += '\\', out += char(c);
        else if (c < 0x20) { char escaped[8]; std::snprintf(escaped, sizeof escaped, "\\u%04x", c); out += escaped; }
        else out += char(c);
    }
    return out + "\"";
}

static std::string format(const char *pattern, ...) __attribute__((format(printf, 1, 2)));
static std::string format(const char *pattern, ...) {
    char buffer[1024];
    va_list arguments;
    va_start(arguments, pattern);
    std::vsnprintf(buffer, sizeof buffer, pattern, arguments);
    va_end(arguments);
    return buffer;
}

static uint64_t round_to_hdr_precision(uint64_t value) {
    int bits = 64 - __builtin_clzll(value | 1);
    int shift = bits > 11 ? bits - 11 : 0;
    return (value >> shift) << shift;
}

// A line to the orchestrator's events pipe (PINGPONG_EVENTS_FD), one write each; none after a failed one.
static int events_fd = -1;
static void emit_event(const char *line) {
    if (events_fd >= 0 && write(events_fd, line, std::strlen(line)) < 0) events_fd = -1;
}

// Block until a line arrives on fd (the start gate or the start barrier); true when it is "go".
static bool read_go_line(int fd) {
    std::string line;
    char c;
    while (line.size() < 16) {
        ssize_t received = read(fd, &c, 1);
        if (received < 0 && errno == EINTR) continue;
        if (received <= 0 || c == '\n') break;
        line += c;
    }
    close(fd);
    return line == "go";
}
