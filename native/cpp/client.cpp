// Ping-pong client driver on websocketpp (standalone Asio, one thread), asynchronous as websocketpp's
// examples are: A sends the ping, B's message handler checks it and replies, A's handler times the roundtrip and
// sends the next ping. A steady timer watches for stalls. Flags, events and report as docs/contract.md says.
// --pairs N: N such pairs, pair i in room ROOM-p<i>, all on the one io_context; they share one window, which the
// first pong after the deadline closes (as node/driver/ping_pong.js does), and the watchdog watches each pair.
// SIGCONTs are counted, and a roundtrip a pause touched is not timed (native/pauses.h).
#define ASIO_STANDALONE
#include <websocketpp/client.hpp>
#include <websocketpp/config/asio_client.hpp>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "client_support.hpp"
#include "common.hpp"

static const char *PROGRAM = "cpp_ws_client";

struct Args {
    std::string url, compression = "default", kind = "text-ascii", ca;
    double duration = 5, warmup = 1, stall_timeout = 10;
    long size = 4, pairs = 1;
    bool record = true;
};

// [value_ns, count] pairs at 11 significant bits, sorted; the orchestrator folds them into a histogram.
static std::string value_counts_json(std::vector<uint64_t> &latencies) {
    for (auto &value : latencies) value = round_to_hdr_precision(value);
    std::sort(latencies.begin(), latencies.end());
    std::string out = "[";
    for (size_t i = 0, j; i < latencies.size(); i = j) {
        for (j = i; j < latencies.size() && latencies[j] == latencies[i];) j++;
        out += format("%s[%llu, %zu]", i ? ", " : "", (unsigned long long)latencies[i], j - i);
    }
    return out + "]";
}

// One pair's state: its name suffix, its ping in flight, its progress and counts.
struct Pair {
    std::string label, url, connections[2];  // label: "" with one pair, its index with --pairs N
    uint64_t sent_at = 0, last_progress = 0;
    size_t roundtrips = 0;
    std::vector<uint64_t> latencies;  // with --pairs N > 1 (every pair's are in Run::latencies too)
    pause_filter pauses = {};         // its latencies held until the pauses around them are known
};

struct Run {
    const Args &args;
    std::string ping, pong, error;
    websocketpp::frame::opcode::value opcode;
    enum { connecting, warming_up, measuring, done } phase = connecting;
    uint64_t last_progress = now_ns(), warmup_start = 0, start = 0, end = 0;
    size_t warmup_roundtrips = 0, roundtrips = 0, latency_dropped = 0;
    uint64_t continued_at_start = 0, continued = 0;  // SIGCONTs: the count at the window's start, then in it
    std::vector<Pair> pairs;
    std::vector<uint64_t> latencies;
    double user_s = 0, system_s = 0;
    explicit Run(const Args &a) : args(a) {}
};

// The room URL of pair index of count: the given room for one pair, ROOM-p<index> with its query string for N.
static std::string pair_url(const std::string &url, long count, long index) {
    if (count == 1) return url;
    size_t query = url.find('?');
    return url.substr(0, query) + "-p" + std::to_string(index) + (query == std::string::npos ? "" : url.substr(query));
}

static std::string describe(websocketpp::frame::opcode::value opcode, const std::string &payload) {
    return format("%s of %zu bytes", opcode == websocketpp::frame::opcode::binary ? "binary" : "text", payload.size());
}

static std::string check(const Run &run, const char *side, const Pair &pair, const std::string &expected,
                         websocketpp::frame::opcode::value opcode, const std::string &received) {
    if (opcode == run.opcode && received == expected) return "";
    return std::string("payload mismatch: connection ") + side + pair.label + " expected " +
           describe(run.opcode, expected) +
           ", received " + describe(opcode, received) +
           (opcode == run.opcode && received.size() == expected.size() ? " with other bytes" : "");
}

template <typename connection_ptr>
static std::string connection_json(const std::string &name, connection_ptr con) {
    auto &socket = con->get_raw_socket();  // the TCP socket, under TLS too
    asio::error_code ec;
    auto local = socket.local_endpoint(ec), peer = socket.remote_endpoint(ec);
    int nodelay = 0;
    socklen_t length = sizeof nodelay;
    getsockopt(socket.native_handle(), IPPROTO_TCP, TCP_NODELAY, &nodelay, &length);
    auto address = [](const asio::ip::tcp::endpoint &e) {
        std::string host = e.address().to_string();
        return (e.address().is_v6() ? "[" + host + "]" : host) + ":" + std::to_string(e.port());
    };
    std::string extensions = con->get_response_header("Sec-WebSocket-Extensions");
    return std::string("{\"name\": \"") + name + "\", \"extensions\": " +
           (extensions.empty() ? "null" : json_string(extensions)) + ", \"subprotocol\": " +
           (con->get_subprotocol().empty() ? "null" : json_string(con->get_subprotocol())) + ", \"family\": \"" +
           (local.address().is_v6() ? "ipv6" : "ipv4") + "\", \"local_address\": \"" + address(local) +
           "\", \"peer_address\": \"" + address(peer) + "\", \"tcp_nodelay\": " + (nodelay ? "true" : "false") + "}";
}

template <typename config, bool tls>
static size_t drive(Run &run) {
    typedef websocketpp::client<config> client;
    typedef typename client::connection_ptr connection_ptr;
    const Args &args = run.args;
    client c;
    c.clear_access_channels(websocketpp::log::alevel::all);  // websocketpp logs to stdout by default
    c.clear_error_channels(websocketpp::log::elevel::all);
    c.get_alog().set_ostream(&std::cerr);
    c.get_elog().set_ostream(&std::cerr);
    c.init_asio();
    std::string tls_problem;  // why the certificate was refused, for the error
    if constexpr (tls) {
        std::string host = websocketpp::uri(args.url).get_host();
        c.set_tls_init_handler([&args, &tls_problem, host](websocketpp::connection_hdl) {
            auto context = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
            context->set_verify_mode(asio::ssl::verify_peer);
            if (args.ca.empty()) context->set_default_verify_paths();
            else context->load_verify_file(args.ca);
            context->set_verify_callback([&tls_problem, host](bool preverified, asio::ssl::verify_context &ctx) {
                bool ok = asio::ssl::host_name_verification(host)(preverified, ctx);
                if (!preverified)
                    tls_problem = X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.native_handle()));
                else if (!ok)
                    tls_problem = "the certificate does not name " + host;
                return ok;
            });
            return context;
        });
    }

    asio::steady_timer watchdog(c.get_io_service());
    const size_t n = run.pairs.size();
    std::vector<connection_ptr> as(n), bs(n);
    size_t closed = 0;
    auto fail = [&](const std::string &message) {
        if (run.error.empty()) run.error = message;
        run.phase = Run::done;
        c.stop();
    };
    auto send = [&](connection_ptr con, const std::string &payload) {
        websocketpp::lib::error_code ec = con->send(payload, run.opcode);
        if (ec) fail("send failed: " + ec.message());
    };
    auto send_ping = [&](size_t i) {
        run.pairs[i].sent_at = now_ns();
        send(as[i], run.ping);
    };
    auto begin_window = [&] {
        run.continued_at_start = continued_now();  // before the event, on which the orchestrator may pause the cell
        emit_event("window-start\n");
        cpu_seconds(run.user_s, run.system_s);
        uint64_t seen = continued_now();
        run.start = now_ns();
        for (auto &pair : run.pairs) pause_filter_open(&pair.pauses, seen);
        run.phase = Run::measuring;
    };
    auto keep_latency = [&](Pair &pair, uint64_t latency) {
        run.latencies.push_back(latency);
        if (n > 1) pair.latencies.push_back(latency);
    };
    auto finish = [&] {
        double user, system;
        cpu_seconds(user, system);
        run.user_s = user - run.user_s;
        run.system_s = system - run.system_s;
        run.continued = continued_now() - run.continued_at_start;
        for (auto &pair : run.pairs) {
            uint64_t kept;
            if (args.record && pause_filter_close(&pair.pauses, &kept)) keep_latency(pair, kept);
            run.latency_dropped += pair.pauses.dropped;
        }
        emit_event("window-end\n");
        run.phase = Run::done;
        websocketpp::lib::error_code ignored;
        for (size_t i = 0; i < n; i++) {
            run.pairs[i].connections[0] = connection_json("A" + run.pairs[i].label, as[i]);
            run.pairs[i].connections[1] = connection_json("B" + run.pairs[i].label, bs[i]);
            as[i]->close(websocketpp::close::status::normal, "", ignored);
            bs[i]->close(websocketpp::close::status::normal, "", ignored);
        }
        watchdog.expires_after(std::chrono::seconds(1));  // a server that never answers the close
        watchdog.async_wait([&](const asio::error_code &ec) { if (!ec) c.stop(); });
    };

    // Open one connection; on_open runs once it is open. A failure to open or a close before the end fails the run.
    auto open = [&](const std::string &name, const std::string &url, std::function<void()> on_open,
                    std::function<void(typename client::message_ptr)> on_message) {
        websocketpp::lib::error_code ec;
        connection_ptr con = c.get_connection(url, ec);
        if (ec) { fail(std::string("cannot open connection ") + name + ": " + ec.message()); return con; }
        con->set_open_handler([&, on_open](websocketpp::connection_hdl) {
            run.last_progress = now_ns();
            on_open();
        });
        con->set_message_handler([on_message](websocketpp::connection_hdl, typename client::message_ptr msg) {
            on_message(msg);
        });
        con->set_fail_handler([&, name](websocketpp::connection_hdl hdl) {
            auto failed = c.get_con_from_hdl(hdl);
            std::string reason = failed->get_ec().message();
            if (!tls_problem.empty()) reason += " (" + tls_problem + ")";
            if (failed->get_response_code() != websocketpp::http::status_code::uninitialized)
                reason += format(" (HTTP %d)", int(failed->get_response_code()));
            fail(std::string("cannot open connection ") + name + " to " + url + ": " + reason);
        });
        con->set_close_handler([&, name](websocketpp::connection_hdl hdl) {
            if (run.phase == Run::done) {
                if (++closed == 2 * n) watchdog.cancel();  // all closed cleanly: nothing left to wait for
                return;
            }
            auto con = c.get_con_from_hdl(hdl);
            fail(std::string("connection ") + name + " closed by the server (close code " +
                 std::to_string(con->get_remote_close_code()) + (con->get_ec() ? ", " + con->get_ec().message() : "") +
                 ")");
        });
        c.connect(con);
        return con;
    };

    auto on_pong = [&](size_t i, typename client::message_ptr msg) {
        uint64_t seen = continued_now(), t = now_ns();
        Pair &pair = run.pairs[i];
        std::string problem = check(run, "A", pair, run.pong, msg->get_opcode(), msg->get_payload());
        if (!problem.empty()) return fail(problem);
        pair.last_progress = t;
        if (run.phase == Run::warming_up) {
            run.warmup_roundtrips++;
            if (t >= run.warmup_start + uint64_t(args.warmup * 1e9)) begin_window();
        } else if (run.phase == Run::measuring) {
            if (args.record) {  // another pair's ping in flight when the window opened counts from its start
                uint64_t latency = t - std::max(pair.sent_at, run.start), kept;
                if (pause_filter_next(&pair.pauses, latency, seen, &kept)) keep_latency(pair, kept);
            }
            pair.roundtrips++;
            run.roundtrips++;
            if (t >= run.start + uint64_t(args.duration * 1e9)) {
                run.end = t;
                return finish();
            }
        }
        if (run.phase != Run::done) send_ping(i);
    };
    auto on_ping = [&](size_t i, typename client::message_ptr msg) {
        std::string problem = check(run, "B", run.pairs[i], run.ping, msg->get_opcode(), msg->get_payload());
        if (!problem.empty()) return fail(problem);
        send(bs[i], run.pong);
    };
    auto all_open = [&] {
        emit_event("ready\n");
        const char *go_fd = std::getenv("PINGPONG_GO_FD");
        if (go_fd && !read_go_line(std::atoi(go_fd)))
            return fail("start barrier: the orchestrator closed it without a go (another client process failed "
                        "or did not get ready)");
        run.warmup_start = run.last_progress = now_ns();
        for (auto &pair : run.pairs) pair.last_progress = run.warmup_start;
        run.phase = Run::warming_up;
        if (args.warmup <= 0) begin_window();
        for (size_t i = 0; i < n; i++) send_ping(i);
    };
    // Pair i's A, then its B, then pair i + 1's, one after the other; once the last B is open, all_open.
    std::function<void(size_t)> open_pair = [&](size_t i) {
        const Pair &pair = run.pairs[i];
        as[i] = open("A" + pair.label, pair.url, [&, i] {
            bs[i] = open("B" + run.pairs[i].label, run.pairs[i].url, [&, i] {
                if (i + 1 < n) open_pair(i + 1);
                else all_open();
            }, [&, i](typename client::message_ptr msg) { on_ping(i, msg); });
        }, [&, i](typename client::message_ptr msg) { on_pong(i, msg); });
    };
    open_pair(0);

    // The stall watchdog: checks a few times per --stall-timeout that a roundtrip (or an open) happened lately.
    auto period = std::chrono::nanoseconds(uint64_t(std::min(1.0, args.stall_timeout / 4) * 1e9));
    std::function<void()> watch = [&] {
        watchdog.expires_after(period);
        watchdog.async_wait([&](const asio::error_code &ec) {
            if (ec || run.phase == Run::done) return;
            const char *phase = run.phase == Run::connecting ? "connect" : run.phase == Run::warming_up
                                                                               ? "warmup" : "window";
            uint64_t now = now_ns(), limit = uint64_t(args.stall_timeout * 1e9);
            if (run.phase == Run::connecting && now - run.last_progress >= limit)
                return fail(format("stall: no roundtrip completed for %g s (phase %s)", args.stall_timeout, phase));
            for (const auto &pair : run.pairs)  // each pair on its own: one stalled pair among busy ones is a stall
                if (run.phase != Run::connecting && now - pair.last_progress >= limit)
                    return fail(format("stall: no roundtrip completed for %g s%s%s (phase %s)", args.stall_timeout,
                                       pair.label.empty() ? "" : " on pair ", pair.label.c_str(), phase));
            watch();
        });
    };
    watch();
    c.run();
    return c.get_max_message_size();
}

int main(int argc, char **argv) {
    Args args;
    std::string loop = "auto";
    static const char *unsupported[] = {"--workload", "--rate", "--idle-connections", "--receivers",
                                        "--broadcast-role", "--ack-processes", "--ab-windows"};
    auto number = [](const std::string &flag, const char *text) {
        char *end = nullptr;
        double value = std::strtod(text, &end);
        if (end == text || *end) usage_error(PROGRAM, flag + " needs a number, got " + text);
        return value;
    };
    for (int i = 1; i < argc; i++) {
        std::string flag = argv[i];
        if (flag == "--no-latency") { args.record = false; continue; }
        for (const char *name : unsupported)
            if (flag == name) usage_error(PROGRAM, flag + " is not supported: this client runs closed-loop ping-pong only");
        if (i + 1 >= argc) usage_error(PROGRAM, flag + " needs a value");
        const char *value = argv[++i];
        if (flag == "--url") args.url = value;
        else if (flag == "--duration") args.duration = number(flag, value);
        else if (flag == "--warmup") args.warmup = number(flag, value);
        else if (flag == "--stall-timeout") args.stall_timeout = number(flag, value);
        else if (flag == "--payload-size") args.size = long(number(flag, value));
        else if (flag == "--payload-kind") args.kind = value;
        else if (flag == "--pairs") args.pairs = long(number(flag, value));
        else if (flag == "--compression") args.compression = value;
        else if (flag == "--loop") loop = value;
        else if (flag == "--tls-ca") args.ca = value;
        else usage_error(PROGRAM, "unknown option " + flag);
    }
    bool tls = args.url.rfind("wss://", 0) == 0;
    if (!tls && args.url.rfind("ws://", 0) != 0) usage_error(PROGRAM, "--url ws://H:P/ROOM or wss://H:P/ROOM is required");
    if (args.duration <= 0 || args.warmup < 0 || args.stall_timeout <= 0 || args.size < 1)
        usage_error(PROGRAM, "--duration and --stall-timeout must be > 0, --warmup >= 0, --payload-size >= 1");
    if (args.pairs < 1) usage_error(PROGRAM, "--pairs must be >= 1 (this client holds no idle connections)");
    if (args.kind != "text-ascii" && args.kind != "text-utf8" && args.kind != "binary")
        usage_error(PROGRAM, "--payload-kind must be text-ascii, text-utf8 or binary");
    if (args.compression != "default" && args.compression != "off" && args.compression != "on")
        usage_error(PROGRAM, "--compression must be default, off or on");
    if (loop != "auto") usage_error(PROGRAM, "--loop " + loop + " is not supported (only auto: asio)");

    count_pauses();
    Run run(args);
    run.ping = make_payload(args.kind, size_t(args.size), 0);
    run.pong = make_payload(args.kind, size_t(args.size), 1);
    run.opcode = args.kind == "binary" ? websocketpp::frame::opcode::binary : websocketpp::frame::opcode::text;
    run.pairs.resize(size_t(args.pairs));
    for (long i = 0; i < args.pairs; i++) {
        run.pairs[i].label = args.pairs > 1 ? std::to_string(i) : "";
        run.pairs[i].url = pair_url(args.url, args.pairs, i);
    }
    const char *events = std::getenv("PINGPONG_EVENTS_FD");
    events_fd = events ? std::atoi(events) : -1;
    if (const char *start_fd = std::getenv("PINGPONG_START_FD")) {
        emit_event("armed\n");
        if (!read_go_line(std::atoi(start_fd))) return 0;  // not needed after all: no report
    }

    bool on = args.compression == "on";
    size_t max_message_size;
    if (tls) max_message_size = on ? drive<with_deflate<websocketpp::config::asio_tls_client>, true>(run)
                                   : drive<websocketpp::config::asio_tls_client, true>(run);
    else max_message_size = on ? drive<with_deflate<websocketpp::config::asio_client>, false>(run)
                               : drive<websocketpp::config::asio_client, false>(run);

    std::string report = "{\"format_version\": 1, \"role\": \"client\", \"implementation\": \"cpp-websocketpp\", "
        "\"runtime\": " + runtime_json() + ", \"libraries\": " + libraries_json() + ", \"loop\": \"asio\", "
        "\"settings\": {\"compression\": \"" + args.compression + "\", \"compression_offered\": " +
        (on ? "true" : "false") + ", \"tls\": " + (tls ? "true" : "false") + ", \"max_message_size\": " +
        std::to_string(max_message_size) + "}, \"payload\": {\"kind\": \"" + args.kind + "\", \"size\": " +
        std::to_string(args.size) + "}, \"workload\": \"pingpong\", \"pairs\": " + std::to_string(args.pairs);
    if (!run.error.empty() || run.end == 0) {
        if (run.error.empty()) run.error = "the connections ended before the window did";
        std::printf("%s, \"error\": %s, \"errors\": 1}\n", report.c_str(), json_string(run.error).c_str());
        std::fprintf(stderr, "cpp-websocketpp client: %s\n", run.error.c_str());
        return 1;
    }
    double elapsed = (run.end - run.start) / 1e9;
    report += format(", \"error\": null, \"errors\": 0, \"warmup\": {\"roundtrips\": %zu, \"elapsed_s\": %.9f}, "
                     "\"roundtrips\": %zu, \"elapsed_s\": %.9f, \"roundtrips_per_s\": %.6f, \"cpu\": {\"user_s\": %.6f, "
                     "\"system_s\": %.6f}, \"pauses\": {\"continued\": %llu, \"latency_dropped\": %zu}, "
                     "\"latency\": {\"unit\": \"ns\", \"recorded\": %s, \"hdr_histogram\": null",
                     run.warmup_roundtrips, (run.start - run.warmup_start) / 1e9, run.roundtrips, elapsed,
                     run.roundtrips / elapsed, run.user_s, run.system_s, (unsigned long long)run.continued,
                     run.latency_dropped, args.record ? "true" : "false");
    if (args.record) report += ", \"value_counts\": " + value_counts_json(run.latencies);
    report += "}, \"connections\": [";
    for (size_t i = 0; i < run.pairs.size(); i++)
        report += (i ? ", " : "") + run.pairs[i].connections[0] + ", " + run.pairs[i].connections[1];
    report += "]";
    if (args.pairs > 1) {
        report += ", \"per_pair_roundtrips\": [";
        for (size_t i = 0; i < run.pairs.size(); i++)
            report += (i ? ", " : "") + std::to_string(run.pairs[i].roundtrips);
        report += "]";
        if (args.record) {
            report += ", \"per_pair_value_counts\": [";
            for (size_t i = 0; i < run.pairs.size(); i++)
                report += (i ? ", " : "") + value_counts_json(run.pairs[i].latencies);
            report += "]";
        }
    }
    std::printf("%s}\n", report.c_str());
    return 0;
}
