// Ping-pong relay server on websocketpp (standalone Asio, one thread running the io_context), in the style of
// websocketpp's broadcast_server and echo_server_tls examples. The request path without its query is the room.
#define ASIO_STANDALONE
#include <websocketpp/config/asio.hpp>
#include <websocketpp/server.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <unistd.h>

#include "common.hpp"

struct Args {
    std::string host = "127.0.0.1", port, compression = "default", cert, key;
};

static void write_info(const Args &args) {
    const char *path = std::getenv("PINGPONG_INFO_FILE");
    if (!path) return;
    std::string temporary = std::string(path) + "." + std::to_string(getpid()) + ".tmp";
    std::ofstream(temporary) << "{\"format_version\": 1, \"role\": \"server\", \"pid\": " << getpid()
        << ", \"implementation\": \"cpp-websocketpp\", \"runtime\": " << runtime_json() << ", \"libraries\": "
        << libraries_json() << ", \"loop_requested\": \"auto\", \"loop\": \"asio\", \"settings\": {\"compression\": \""
        << args.compression << "\", \"compression_effective\": " << (args.compression == "on" ? "true" : "false")
        << ", \"tls\": " << (args.cert.empty() ? "false" : "true") << "}}";
    std::rename(temporary.c_str(), path);
}

template <typename config, bool tls>
static int serve(const Args &args) {
    typedef websocketpp::server<config> server;
    typedef std::set<websocketpp::connection_hdl, std::owner_less<websocketpp::connection_hdl>> members;
    server s;
    std::map<std::string, members> rooms;

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
        auto room = rooms.find(room_of(hdl));
        if (room == rooms.end()) return;
        room->second.erase(hdl);
        if (room->second.empty()) rooms.erase(room);
    };
    s.set_open_handler([&](websocketpp::connection_hdl hdl) { rooms[room_of(hdl)].insert(hdl); });
    s.set_close_handler(leave);  // after an error too; a connection that never opened was in no room
    s.set_message_handler([&](websocketpp::connection_hdl hdl, typename server::message_ptr msg) {
        // The same message, text or binary as it came, to every other member. A member that does not read only
        // grows its own send queue; nobody else waits for it.
        for (auto &other : rooms[room_of(hdl)]) {
            if (other.owner_before(hdl) || hdl.owner_before(other)) {
                websocketpp::lib::error_code ignored;
                s.send(other, msg, ignored);
            }
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
        for (auto &room : rooms)
            for (auto &member : room.second) s.close(member, websocketpp::close::status::going_away, "", ignored);
        deadline.expires_after(std::chrono::milliseconds(300));
        deadline.async_wait([&](const asio::error_code &) { s.stop(); });
    });

    asio::post(s.get_io_service(), [&] { write_info(args); });
    std::fprintf(stderr, "cpp-websocketpp server listening on %s:%s\n", args.host.c_str(), args.port.c_str());
    s.run();
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
