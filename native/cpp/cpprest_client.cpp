// Ping-pong client driver on cpprestsdk's web::websockets::client::websocket_client (Casablanca 2.10, Debian's
// libcpprest-dev), the task-based client of its documentation: send() and receive() return pplx tasks, which run
// on the library's thread pool (websocketpp and Boost.Asio underneath), and the driver waits on each with get().
// A sends the ping, B receives and checks it and sends the pong, A receives and checks it. The library does not
// expose its sockets; the report finds each connection's TCP socket among the process's descriptors (the one that
// appeared when it connected) to give its addresses and the real TCP_NODELAY. A watchdog thread ends a stalled
// run with its report. Flags, events and report as docs/contract.md says, as native/cpp/client.cpp does. SIGCONTs
// are counted, and a roundtrip a pause touched is not timed (native/pauses.h).
#include <cpprest/version.h>
#include <cpprest/ws_client.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/version.hpp>
#include <openssl/opensslv.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "client_support.hpp"

using web::websockets::client::websocket_client;
using web::websockets::client::websocket_client_config;
using web::websockets::client::websocket_incoming_message;
using web::websockets::client::websocket_message_type;
using web::websockets::client::websocket_outgoing_message;

static const char *PROGRAM = "cpp_cpprest_client";

struct Args {
    std::string url, compression = "default", kind = "text-ascii", ca;
    double duration = 5, warmup = 1, stall_timeout = 10;
    long size = 4;
    bool record = true;
};

[[noreturn]] static void usage_error(const std::string &message) {
    std::fprintf(stderr, "%s: %s\n", PROGRAM, message.c_str());
    std::exit(2);
}

// The process's connected TCP sockets, by descriptor.
static std::set<int> tcp_sockets() {
    std::set<int> found;
    rlimit limit;
    getrlimit(RLIMIT_NOFILE, &limit);
    for (int fd = 0; fd < int(std::min<rlim_t>(limit.rlim_cur, 4096)); fd++) {
        int type = 0;
        socklen_t length = sizeof type;
        sockaddr_storage peer;
        socklen_t peer_length = sizeof peer;
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) == 0 && type == SOCK_STREAM &&
            getpeername(fd, reinterpret_cast<sockaddr *>(&peer), &peer_length) == 0)
            found.insert(fd);
    }
    return found;
}

static std::string address(const sockaddr_storage &a) {
    char host[INET6_ADDRSTRLEN] = "?";
    if (a.ss_family == AF_INET6) {
        auto *v6 = reinterpret_cast<const sockaddr_in6 *>(&a);
        inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof host);
        return "[" + std::string(host) + "]:" + std::to_string(ntohs(v6->sin6_port));
    }
    auto *v4 = reinterpret_cast<const sockaddr_in *>(&a);
    inet_ntop(AF_INET, &v4->sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(ntohs(v4->sin_port));
}

// One connection as the report lists it; the socket's fields are null when it was not found (-1).
static std::string connection_json(const char *name, int fd) {
    std::string out = std::string("{\"name\": \"") + name + "\", \"extensions\": null, \"subprotocol\": null";
    sockaddr_storage local, peer;
    socklen_t local_length = sizeof local, peer_length = sizeof peer;
    int nodelay = 0;
    socklen_t length = sizeof nodelay;
    if (fd < 0 || getsockname(fd, reinterpret_cast<sockaddr *>(&local), &local_length) ||
        getpeername(fd, reinterpret_cast<sockaddr *>(&peer), &peer_length) ||
        getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, &length))
        return out + ", \"family\": null, \"tcp_nodelay\": null}";
    return out + ", \"family\": \"" + (local.ss_family == AF_INET6 ? "ipv6" : "ipv4") + "\", \"local_address\": \"" +
           address(local) + "\", \"peer_address\": \"" + address(peer) + "\", \"tcp_nodelay\": " +
           (nodelay ? "true" : "false") + "}";
}

struct Run {
    Args args;
    std::string ping, pong;
    websocket_message_type type = websocket_message_type::text_message;
    std::atomic<uint64_t> last_progress{now_ns()};
    std::atomic<bool> finished{false};
    std::mutex report_lock;  // the main thread and the watchdog: whichever reports first, alone
};

static std::string report_head(const Run &run, bool tls) {
    return "{\"format_version\": 1, \"role\": \"client\", \"implementation\": \"cpp-cpprestsdk\", \"runtime\": "
           "{\"name\": \"c++\", \"version\": \"g++ " __VERSION__ "\"}, \"libraries\": {\"cpprestsdk\": \"" +
           format("%d.%d.%d", CPPREST_VERSION_MAJOR, CPPREST_VERSION_MINOR, CPPREST_VERSION_REVISION) +
           "\", \"boost\": \"" + format("%d.%d.%d", BOOST_VERSION / 100000, BOOST_VERSION / 100 % 1000,
                                        BOOST_VERSION % 100) +
           "\", \"openssl\": \"" OPENSSL_VERSION_STR "\"}, \"loop\": \"pplx\", \"settings\": {\"compression\": \"" +
           run.args.compression + "\", \"compression_offered\": false, \"tls\": " + (tls ? "true" : "false") +
           ", \"latency_recorded\": " + (run.args.record ? "true" : "false") + "}, \"payload\": {\"kind\": \"" +
           run.args.kind + "\", \"size\": " + std::to_string(run.args.size) + "}, \"workload\": \"pingpong\", "
           "\"pairs\": 1";
}

// The error report and exit 1, once (the main thread and the watchdog may both get here).
[[noreturn]] static void fail(Run &run, bool tls, const std::string &error) {
    std::lock_guard<std::mutex> lock(run.report_lock);
    std::printf("%s, \"error\": %s, \"errors\": 1}\n", report_head(run, tls).c_str(), json_string(error).c_str());
    std::fflush(stdout);
    std::fprintf(stderr, "cpp-cpprestsdk client: %s\n", error.c_str());
    std::_Exit(1);  // the library's threads may be blocked on a peer that never answers
}

static websocket_outgoing_message message(const Run &run, const std::string &payload) {
    websocket_outgoing_message out;
    if (run.type == websocket_message_type::text_message) {
        out.set_utf8_message(payload);
    } else {
        concurrency::streams::container_buffer<std::vector<uint8_t>> buffer({payload.begin(), payload.end()});
        out.set_binary_message(buffer.create_istream(), payload.size());
    }
    return out;
}

// The next message's bytes, checked against what is expected; an empty string when it matches, else the problem.
static std::string check(const Run &run, const char *who, const std::string &expected,
                         const websocket_incoming_message &received) {
    concurrency::streams::container_buffer<std::vector<uint8_t>> buffer;
    received.body().read_to_end(buffer).get();
    std::string bytes(buffer.collection().begin(), buffer.collection().end());
    auto name = [](websocket_message_type type) {
        return type == websocket_message_type::binary_message ? "binary" : type == websocket_message_type::text_message
                                                                           ? "text" : "control";
    };
    if (received.message_type() == run.type && bytes == expected) return "";
    return format("payload mismatch: connection %s expected %s of %zu bytes, received %s of %zu bytes%s", who,
                  name(run.type), expected.size(), name(received.message_type()), bytes.size(),
                  received.message_type() == run.type && bytes.size() == expected.size() ? " with other bytes" : "");
}

int main(int argc, char **argv) {
    Run run;
    Args &args = run.args;
    std::string loop = "auto";
    static const char *unsupported[] = {"--pairs", "--workload", "--rate", "--idle-connections", "--receivers",
                                        "--broadcast-role", "--ack-processes", "--ab-windows"};
    auto number = [](const std::string &flag, const char *text) {
        char *end = nullptr;
        double value = std::strtod(text, &end);
        if (end == text || *end) usage_error(flag + " needs a number, got " + text);
        return value;
    };
    for (int i = 1; i < argc; i++) {
        std::string flag = argv[i];
        if (flag == "--no-latency") { args.record = false; continue; }
        for (const char *name : unsupported)
            if (flag == name) usage_error(flag + " is not supported: this client runs one ping-pong pair");
        if (i + 1 >= argc) usage_error(flag + " needs a value");
        const char *value = argv[++i];
        if (flag == "--url") args.url = value;
        else if (flag == "--duration") args.duration = number(flag, value);
        else if (flag == "--warmup") args.warmup = number(flag, value);
        else if (flag == "--stall-timeout") args.stall_timeout = number(flag, value);
        else if (flag == "--payload-size") args.size = long(number(flag, value));
        else if (flag == "--payload-kind") args.kind = value;
        else if (flag == "--compression") args.compression = value;
        else if (flag == "--loop") loop = value;
        else if (flag == "--tls-ca") args.ca = value;
        else usage_error("unknown option " + flag);
    }
    bool tls = args.url.rfind("wss://", 0) == 0;
    if (!tls && args.url.rfind("ws://", 0) != 0) usage_error("--url ws://H:P/ROOM or wss://H:P/ROOM is required");
    if (args.duration <= 0 || args.warmup < 0 || args.stall_timeout <= 0 || args.size < 1)
        usage_error("--duration and --stall-timeout must be > 0, --warmup >= 0, --payload-size >= 1");
    if (args.kind != "text-ascii" && args.kind != "text-utf8" && args.kind != "binary")
        usage_error("--payload-kind must be text-ascii, text-utf8 or binary");
    if (args.compression != "default" && args.compression != "off")
        usage_error("--compression must be default or off (cpprestsdk offers no permessage-deflate)");
    if (loop != "auto") usage_error("--loop " + loop + " is not supported (only auto: pplx)");

    count_pauses();
    run.ping = make_payload(args.kind, size_t(args.size), 0);
    run.pong = make_payload(args.kind, size_t(args.size), 1);
    if (args.kind == "binary") run.type = websocket_message_type::binary_message;
    const char *events = std::getenv("PINGPONG_EVENTS_FD");
    events_fd = events ? std::atoi(events) : -1;
    if (const char *start_fd = std::getenv("PINGPONG_START_FD")) {
        emit_event("armed\n");
        if (!read_go_line(std::atoi(start_fd))) return 0;  // not needed after all: no report
    }

    // The stall watchdog: a few times per --stall-timeout, checks that a roundtrip (or an open) happened lately.
    const char *phase = "connect";
    std::thread([&run, &phase, tls] {
        auto period = std::chrono::nanoseconds(uint64_t(std::min(1.0, run.args.stall_timeout / 4) * 1e9));
        while (!run.finished) {
            std::this_thread::sleep_for(period);
            if (!run.finished && now_ns() - run.last_progress >= uint64_t(run.args.stall_timeout * 1e9))
                fail(run, tls, format("stall: no roundtrip completed for %g s (phase %s)", run.args.stall_timeout,
                                      phase));
        }
    }).detach();

    websocket_client_config config;
    if (tls && !args.ca.empty()) {
        std::string ca = args.ca;
        config.set_ssl_context_callback([ca](boost::asio::ssl::context &context) { context.load_verify_file(ca); });
    }
    websocket_client a(config), b(config);
    int fds[2] = {-1, -1};
    websocket_client *clients[2] = {&a, &b};
    for (int i = 0; i < 2; i++) {
        std::set<int> before = tcp_sockets();
        try {
            clients[i]->connect(utility::conversions::to_string_t(args.url)).get();
        } catch (const std::exception &error) {
            fail(run, tls, format("cannot open connection %s to %s: %s", i ? "B" : "A", args.url.c_str(),
                                  error.what()));
        }
        for (int fd : tcp_sockets())
            if (!before.count(fd)) fds[i] = fd;
    }
    emit_event("ready\n");
    const char *go_fd = std::getenv("PINGPONG_GO_FD");
    if (go_fd && !read_go_line(std::atoi(go_fd)))
        fail(run, tls, "start barrier: the orchestrator closed it without a go (another client process failed or "
                       "did not get ready)");

    std::vector<uint64_t> latencies;
    size_t warmup_roundtrips = 0, roundtrips = 0;
    uint64_t warmup_start = now_ns(), start = 0, end = 0, continued_at_start = 0, continued = 0, kept;
    pause_filter pauses = {};
    double user_start = 0, system_start = 0, user_s = 0, system_s = 0;
    run.last_progress = warmup_start;
    phase = "warmup";
    bool measuring = false;
    try {
        for (;;) {
            uint64_t sent_at = now_ns();
            a.send(message(run, run.ping)).get();
            std::string problem = check(run, "B", run.ping, b.receive().get());
            if (!problem.empty()) fail(run, tls, problem);
            b.send(message(run, run.pong)).get();
            problem = check(run, "A", run.pong, a.receive().get());
            if (!problem.empty()) fail(run, tls, problem);
            uint64_t seen = continued_now(), t = now_ns();
            run.last_progress = t;
            if (!measuring) {
                warmup_roundtrips++;
                if (t < warmup_start + uint64_t(args.warmup * 1e9)) continue;
                continued_at_start = continued_now();  // before the event, on which the orchestrator may pause the cell
                emit_event("window-start\n");
                cpu_seconds(user_start, system_start);
                pause_filter_open(&pauses, continued_now());
                start = now_ns();
                measuring = true;
                phase = "window";
                continue;
            }
            if (args.record && pause_filter_next(&pauses, t - sent_at, seen, &kept)) latencies.push_back(kept);
            roundtrips++;
            if (t >= start + uint64_t(args.duration * 1e9)) {
                end = t;
                break;
            }
        }
    } catch (const std::exception &error) {
        fail(run, tls, std::string("connection failed (") + phase + "): " + error.what());
    }
    continued = continued_now() - continued_at_start;
    if (args.record && pause_filter_close(&pauses, &kept)) latencies.push_back(kept);
    cpu_seconds(user_s, system_s);
    user_s -= user_start;
    system_s -= system_start;
    emit_event("window-end\n");
    std::string connections = connection_json("A", fds[0]) + ", " + connection_json("B", fds[1]);
    run.last_progress = now_ns();
    phase = "close";
    run.finished = true;
    pplx::task<void> closes[2] = {a.close(), b.close()};  // the closing handshakes, for 1 s at most
    for (uint64_t deadline = now_ns() + 1000000000u; now_ns() < deadline;) {
        if (closes[0].is_done() && closes[1].is_done()) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }

    double elapsed = (end - start) / 1e9;
    std::string report = report_head(run, tls);
    report += format(", \"error\": null, \"errors\": 0, \"warmup\": {\"roundtrips\": %zu, \"elapsed_s\": %.9f}, "
                     "\"roundtrips\": %zu, \"elapsed_s\": %.9f, \"roundtrips_per_s\": %.6f, \"cpu\": {\"user_s\": "
                     "%.6f, \"system_s\": %.6f}, \"pauses\": {\"continued\": %llu, \"latency_dropped\": %zu}, "
                     "\"latency\": {\"unit\": \"ns\", \"recorded\": %s, \"hdr_histogram\": null",
                     warmup_roundtrips, (start - warmup_start) / 1e9, roundtrips, elapsed, roundtrips / elapsed,
                     user_s, system_s, (unsigned long long)continued, pauses.dropped, args.record ? "true" : "false");
    if (args.record) {
        // [value_ns, count] pairs at 11 significant bits, sorted; the orchestrator folds them into a histogram.
        for (auto &value : latencies) value = round_to_hdr_precision(value);
        std::sort(latencies.begin(), latencies.end());
        report += ", \"value_counts\": [";
        for (size_t i = 0, j; i < latencies.size(); i = j) {
            for (j = i; j < latencies.size() && latencies[j] == latencies[i];) j++;
            report += format("%s[%llu, %zu]", i ? ", " : "", (unsigned long long)latencies[i], j - i);
        }
        report += "]";
    }
    std::lock_guard<std::mutex> lock(run.report_lock);
    std::printf("%s}, \"connections\": [%s]}\n", report.c_str(), connections.c_str());
    std::fflush(stdout);
    std::_Exit(0);  // not the library's thread pool teardown, which may wait on its timers
}
