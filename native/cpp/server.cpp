// Ping-pong relay server on websocketpp (standalone Asio), in the style of websocketpp's broadcast_server and
// echo_server_tls examples. The request path without its query is the room. One thread runs the io_context; with
// --workers N, N threads run it, as websocketpp's testee_server example does (the main thread and N - 1 more), and the
// rooms, which every thread's handlers read and change, sit behind one mutex, as broadcast_server's connections do.
#define ASIO_STANDALONE
#include <websocketpp/config/asio.hpp>
#include <websocketpp/server.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "common.hpp"

struct Args {
    std::string host = "127.0.0.1", port, compression = "default", cert, key;
    long workers = 0;  // --workers N: threads running the io_context; 0 = not given (one)
};

static long io_threads(const Args &args) { return args.workers ? args.workers : 1; }

static void write_info(const Args &args) {
    const char *path = std::getenv("PINGPONG_INFO_FILE");
    if (!path) return;
    std::string temporary = std::string(path) + "." + std::to_string(getpid()) + ".tmp";
    std::ofstream(temporary) << "{\"format_version\": 1, \"role\": \"server\", \"pid\": " << getpid()
        << ", \"implementation\": \"cpp-websocketpp\", \"runtime\": " << runtime_json() << ", \"libraries\": "
        << libraries_json() << ", \"loop_requested\": \"auto\", \"loop\": \"asio\", \"settings\": {\"compression\": \""
        << args.compression << "\", \"compression_effective\": " << (args.compression == "on" ? "true" : "false")
        << ", \"tls\": " << (args.cert.empty() ? "false" : "true") << ", \"workers\": "
        << (args.workers ? std::to_string(args.workers) : "null") << ", \"io_threads\": " << io_threads(args)
        << "}}";
    std::rename(temporary.c_str(), path);
}

template <typename config, bool tls>
static int serve(const Args &args) {
    typedef websocketpp::server<config> server;
    typedef std::set<websocketpp::connection_hdl, std::owner_less<websocketpp::connection_hdl>> members;
    server s;
    std::map<std::string, members> rooms;
    std::mutex rooms_mutex;  // held only to read or change rooms, never while sending

    s.clear_access_channels(websocketpp::log::alevel::all);  // websocketpp logs to stdout by default
    s.clear_error_channels(websocketpp::log::elevel::all);
    s.get_alog().set_ostream(&std::cerr);
    s.get_elog().set_ostream(&std::cerr);
    s.init_asio();
    s.set_reuse_addr(true);

    if constexpr (tls) {
        // One context from the PEM files, loaded up front so a bad file fails the start, not each handshake.
        auto context = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
        try {
            context->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                                 asio::ssl::context::no_sslv3 | asio::ssl::context::single_dh_use);
            context->use_certificate_chain_file(args.cert);
            context->use_private_key_file(args.key, asio::ssl::context::pem);
        } catch (const std::exception &error) {
            std::fprintf(stderr, "cpp_ws_server: cannot load %s / %s: %s\n", args.cert.c_str(), args.key.c_str(),
                         error.what());
            return 1;
        }
        s.set_tls_init_handler([context](websocketpp::connection_hdl) { return context; });
    }

    auto room_of = [&s](websocketpp::connection_hdl hdl) {
        std::string resource = s.get_con_from_hdl(hdl)->get_resource();
        std::string room = resource.substr(0, resource.find('?'));
        return room.empty() ? std::string("/") : room;
    };
    auto leave = [&](websocketpp::connection_hdl hdl) {
        std::string name = room_of(hdl);
        std::lock_guard<std::mutex> guard(rooms_mutex);
        auto room = rooms.find(name);
        if (room == rooms.end()) return;
        room->second.erase(hdl);
        if (room->second.empty()) rooms.erase(room);
    };
    s.set_open_handler([&](websocketpp::connection_hdl hdl) {
        std::string name = room_of(hdl);
        std::lock_guard<std::mutex> guard(rooms_mutex);
        rooms[name].insert(hdl);
    });
    s.set_close_handler(leave);  // after an error too; a connection that never opened was in no room
    s.set_message_handler([&](websocketpp::connection_hdl hdl, typename server::message_ptr msg) {
        // The same message, text or binary as it came, to every other member. A member that does not read only
        // grows its own send queue; nobody else waits for it. The others are copied out under the lock and sent to
        // after it (a send may write at once), so one room's sends never wait for another's.
        std::vector<websocketpp::connection_hdl> others;
        std::string name = room_of(hdl);
        {
            std::lock_guard<std::mutex> guard(rooms_mutex);
            auto room = rooms.find(name);
            if (room == rooms.end()) return;
            for (auto &other : room->second)
                if (other.owner_before(hdl) || hdl.owner_before(other)) others.push_back(other);
        }
        for (auto &other : others) {
            websocketpp::lib::error_code ignored;
            s.send(other, msg, ignored);
        }
    });

    websocketpp::lib::error_code ec;
    s.listen(args.host, args.port, ec);
    if (!ec) s.start_accept(ec);
    if (ec) {
        std::fprintf(stderr, "cpp_ws_server: cannot listen on %s:%s: %s\n", args.host.c_str(), args.port.c_str(),
                     ec.message().c_str());
        return 1;
    }

    // SIGTERM/SIGINT: stop accepting, close every connection, and stop the loop 300 ms later at the latest.
    asio::signal_set signals(s.get_io_service(), SIGTERM, SIGINT);
    asio::steady_timer deadline(s.get_io_service());
    signals.async_wait([&](const asio::error_code &, int) {
        websocketpp::lib::error_code ignored;
        s.stop_listening(ignored);
        std::vector<websocketpp::connection_hdl> everyone;
        {
            std::lock_guard<std::mutex> guard(rooms_mutex);
            for (auto &room : rooms) everyone.insert(everyone.end(), room.second.begin(), room.second.end());
        }
        for (auto &member : everyone) s.close(member, websocketpp::close::status::going_away, "", ignored);
        deadline.expires_after(std::chrono::milliseconds(300));
        deadline.async_wait([&](const asio::error_code &) { s.stop(); });
    });

    asio::post(s.get_io_service(), [&] { write_info(args); });
    std::fprintf(stderr, "cpp-websocketpp server listening on %s:%s\n", args.host.c_str(), args.port.c_str());
    std::vector<std::thread> more;  // --workers N: N - 1 threads beside this one, each running the io_context
    for (long i = 1; i < io_threads(args); ++i) more.emplace_back([&s] { s.run(); });
    s.run();
    for (auto &thread : more) thread.join();
    return 0;
}

int main(int argc, char **argv) {
    const char *program = "cpp_ws_server";
    Args args;
    std::string loop = "auto";
    for (int i = 1; i < argc; i += 2) {
        std::string flag = argv[i];
        if (i + 1 >= argc) usage_error(program, flag + " needs a value");
        std::string value = argv[i + 1];
        if (flag == "--host") args.host = value;
        else if (flag == "--port") args.port = value;
        else if (flag == "--loop") loop = value;
        else if (flag == "--compression") args.compression = value;
        else if (flag == "--tls-cert") args.cert = value;
        else if (flag == "--tls-key") args.key = value;
        else if (flag == "--workers") {
            char *end = nullptr;
            args.workers = std::strtol(value.c_str(), &end, 10);
            if (args.workers < 1 || *end) usage_error(program, "--workers " + value + ": expected an integer of at least 1");
        }
        else usage_error(program, "unknown option " + flag);
    }
    char *end = nullptr;
    long port = args.port.empty() ? -1 : std::strtol(args.port.c_str(), &end, 10);
    if (port < 0 || port > 65535 || *end) usage_error(program, "--port P (0-65535) is required");
    if (loop != "auto") usage_error(program, "--loop " + loop + " is not supported (only auto: asio)");
    if (args.compression != "default" && args.compression != "off" && args.compression != "on")
        usage_error(program, "--compression must be default, off or on");
    if (args.cert.empty() != args.key.empty()) usage_error(program, "--tls-cert and --tls-key go together");

    bool tls = !args.cert.empty(), on = args.compression == "on";
    if (tls) return on ? serve<with_deflate<websocketpp::config::asio_tls>, true>(args)
                       : serve<websocketpp::config::asio_tls, true>(args);
    return on ? serve<with_deflate<websocketpp::config::asio>, false>(args)
              : serve<websocketpp::config::asio, false>(args);
}
