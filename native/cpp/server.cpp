// Ping-pong relay server on websocketpp (standalone Asio), in the style of websocketpp's broadcast_server and
// echo_server_tls examples. The request path without its query is the room. One thread runs the io_context; with
// --workers N, N threads run it, as websocketpp's testee_server example does (the main thread and N - 1 more), and the
// rooms, which every thread's handlers read and change, sit behind one mutex, as broadcast_server's connections do.
// With --worker-ports (placement by room), each of the N threads runs an io_context of its own, as Asio's
// io_context-per-CPU example (http/server2) does, with an endpoint that listens on PORT+1+i, so a connection stays on
// the thread that accepted it; the shared port is served by thread 0. Each thread makes its own io_context and
// endpoints (so they come from its own malloc arena) and keeps its own members per room, which only it touches, so a
// message to a room whose members all sit on one thread takes no lock; a room with members on other threads too (a
// count per room says so) is looked up in the map of all members behind the mutex, and such a member is sent to
// through its own connection, which posts the write to its io_context. Each thread writes its counts as a worker
// does (PINGPONG_WORKER_STATS_DIR/worker-PID-I.json, with its thread id).
#define ASIO_STANDALONE
#include <websocketpp/config/asio.hpp>
#include <websocketpp/server.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sys/syscall.h>
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
    bool worker_ports = false;  // --worker-ports: an io_context and a port of its own per thread (PORT+1+i)
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
        << ", \"io_contexts\": " << (args.worker_ports ? io_threads(args) : 1) << "}}";
    std::rename(temporary.c_str(), path);
}

// One TLS context from the PEM files, loaded up front so a bad file fails the start, not each handshake; null (said
// on stderr) when they do not load.
static std::shared_ptr<asio::ssl::context> tls_context(const Args &args) {
    auto context = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
    try {
        context->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                             asio::ssl::context::no_sslv3 | asio::ssl::context::single_dh_use);
        context->use_certificate_chain_file(args.cert);
        context->use_private_key_file(args.key, asio::ssl::context::pem);
    } catch (const std::exception &error) {
        std::fprintf(stderr, "cpp_ws_server: cannot load %s / %s: %s\n", args.cert.c_str(), args.key.c_str(),
                     error.what());
        return nullptr;
    }
    return context;
}

// What a room sent each accepted member before its open handler ran (serve's and serve_by_thread's not_open), in order.
template <typename server>
using waiting_messages = std::map<websocketpp::connection_hdl, std::vector<typename server::message_ptr>,
                                  std::owner_less<websocketpp::connection_hdl>>;

// At a member's open, under the rooms' lock: what waited for it, sent in order (a send only queues the frame, so no
// later message overtakes it), and its entry gone.
template <typename server>
static void send_what_waited(server &s, waiting_messages<server> &not_open, websocketpp::connection_hdl hdl) {
    auto waiting = not_open.find(hdl);
    if (waiting == not_open.end()) return;
    for (auto &msg : waiting->second) {
        websocketpp::lib::error_code ignored;
        s.send(hdl, msg, ignored);
    }
    not_open.erase(waiting);
}

template <typename config, bool tls>
static int serve(const Args &args) {
    typedef websocketpp::server<config> server;
    typedef std::set<websocketpp::connection_hdl, std::owner_less<websocketpp::connection_hdl>> members;
    server s;
    std::map<std::string, members> rooms;
    std::mutex rooms_mutex;  // held only to read or change rooms (and each member's), never while sending

    s.clear_access_channels(websocketpp::log::alevel::all);  // websocketpp logs to stdout by default
    s.clear_error_channels(websocketpp::log::elevel::all);
    s.get_alog().set_ostream(&std::cerr);
    s.get_elog().set_ostream(&std::cerr);
    s.init_asio();
    s.set_reuse_addr(true);

    if constexpr (tls) {
        auto context = tls_context(args);
        if (!context) return 1;
        s.set_tls_init_handler([context](websocketpp::connection_hdl) { return context; });
    }

    typedef std::map<std::string, members> room_map;
    // each member's room, found at its open (as websocketpp's associative_storage example keeps data per handle), so
    // that a message looks its room up by handle instead of building the room's name from the request again
    std::map<websocketpp::connection_hdl, typename room_map::iterator, std::owner_less<websocketpp::connection_hdl>>
        room_of_member;
    // A member joins its room when its handshake is accepted (the validate handler, before the 101 is written), not
    // when its open handler runs: with N threads, the client may read the 101 and its room-mate send at once while
    // this connection's open handler still waits for its thread, and the message would find no one to go to (a pair's
    // first message was lost so, with three test runs at once on 2 CPUs, 2026-11-28). Until it opens, what the room
    // sends it waits in not_open; its open handler sends that in order, under the lock (a send only queues the frame),
    // so that no later message overtakes it.
    waiting_messages<server> not_open;
    s.set_validate_handler([&](websocketpp::connection_hdl hdl) {
        std::string resource = s.get_con_from_hdl(hdl)->get_resource();
        std::string name = resource.substr(0, resource.find('?'));
        if (name.empty()) name = "/";
        std::lock_guard<std::mutex> guard(rooms_mutex);
        auto room = rooms.try_emplace(name).first;
        room->second.insert(hdl);
        room_of_member[hdl] = room;
        not_open[hdl];
        return true;
    });
    s.set_open_handler([&](websocketpp::connection_hdl hdl) {
        std::lock_guard<std::mutex> guard(rooms_mutex);
        send_what_waited(s, not_open, hdl);
    });
    auto leave = [&](websocketpp::connection_hdl hdl) {
        std::lock_guard<std::mutex> guard(rooms_mutex);
        not_open.erase(hdl);
        auto member = room_of_member.find(hdl);
        if (member == room_of_member.end()) return;  // never accepted: in no room
        auto room = member->second;
        room_of_member.erase(member);
        room->second.erase(hdl);
        if (room->second.empty()) rooms.erase(room);
    };
    s.set_close_handler(leave);  // after an error too
    s.set_fail_handler(leave);   // a handshake that failed after it was accepted
    s.set_message_handler([&](websocketpp::connection_hdl hdl, typename server::message_ptr msg) {
        // The same message, text or binary as it came, to every other member. A member that does not read only
        // grows its own send queue; nobody else waits for it. The others are copied out under the lock and sent to
        // after it (a send may write at once), so one room's sends never wait for another's.
        std::vector<websocketpp::connection_hdl> others;
        {
            std::lock_guard<std::mutex> guard(rooms_mutex);
            auto member = room_of_member.find(hdl);
            if (member == room_of_member.end()) return;
            for (auto &other : member->second->second) {
                if (!(other.owner_before(hdl) || hdl.owner_before(other))) continue;
                auto waiting = not_open.find(other);
                if (waiting != not_open.end())
                    waiting->second.push_back(msg);
                else
                    others.push_back(other);
            }
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

// --worker-ports: thread i's endpoints, its counts and its thread id (written as a worker's counts are). Each thread
// makes its own shard, so that what it writes on every message (its io_context's counts of work, its reactor, its
// endpoint) comes from its own malloc arena and shares no cache line with another thread's.
template <typename server>
struct Shard {
    asio::io_context io;
    server endpoint;
    std::unique_ptr<server> shared;  // thread 0 only: the endpoint of the shared port
    long index = 0, own_port = 0;
    // deliveries sent from this thread's members' messages: written by this thread only, and read by it (its counts
    // are written on its loop) or once every thread has ended, so a plain count, no atomic on every message
    long relayed = 0;
    std::map<std::string, long> joined;  // members that joined each room on this thread (under the rooms' mutex)
    // this thread's members accepted but not yet open (only this thread reads or changes it): what their room sends
    // them meanwhile waits in serve_by_thread's not_open, under the rooms' mutex
    std::set<websocketpp::connection_hdl, std::owner_less<websocketpp::connection_hdl>> waiting;
    std::atomic<long> tid{0};
    struct Room {
        std::set<websocketpp::connection_hdl, std::owner_less<websocketpp::connection_hdl>> members;
        std::shared_ptr<std::atomic<long>> threads;  // the threads with members in the room (the room's own count)
    };
    std::map<std::string, Room> rooms;  // this thread's members per room: only this thread reads or changes it
    // each member's room, found at its open (as websocketpp's associative_storage example keeps data per handle),
    // so that a message looks its room up by handle instead of building the room's name from the request again
    std::map<websocketpp::connection_hdl, typename std::map<std::string, Room>::iterator,
             std::owner_less<websocketpp::connection_hdl>> room_of_member;
};

template <typename config, bool tls>
static int serve_by_thread(const Args &args) {
    typedef websocketpp::server<config> server;
    typedef Shard<server> shard;
    struct Member {
        shard *on;
        websocketpp::connection_hdl hdl;
        bool operator<(const Member &other) const { return hdl.owner_before(other.hdl); }
    };
    const long count = io_threads(args), base = std::strtol(args.port.c_str(), nullptr, 10);
    const char *stats_dir = std::getenv("PINGPONG_WORKER_STATS_DIR");
    std::vector<std::unique_ptr<shard>> shards(count);  // shard i made by thread i
    struct Room {
        std::set<Member> members;  // on every thread
        std::shared_ptr<std::atomic<long>> threads;  // shared with each thread's own entry for the room
    };
    std::map<std::string, Room> rooms;
    std::mutex rooms_mutex;  // held only to read or change rooms, the joined counts and not_open; a send only queues
    // A member joins when its handshake is accepted (the validate handler, before the 101 is written), as in serve:
    // joined at its open handler, a newcomer whose 101 its room-mate on another thread had read first missed that
    // mate's message (the room's thread count still said 1; a test failed so under load, 2026-11-29). What the room
    // sends it until it opens waits here, and its open handler sends that in order, under the lock.
    waiting_messages<server> not_open;
    std::shared_ptr<asio::ssl::context> context;
    if constexpr (tls) {
        context = tls_context(args);
        if (!context) return 1;
    }
    auto write_counts = [&](shard &one, bool final) {
        if (!stats_dir) return;
        std::string joined = "{";
        {
            std::lock_guard<std::mutex> guard(rooms_mutex);
            for (auto &[room, members] : one.joined)
                joined += (joined.size() > 1 ? ", \"" : "\"") + room + "\": " + std::to_string(members);
        }
        joined += "}";
        std::string path = std::string(stats_dir) + "/worker-" + std::to_string(getpid()) + "-" +
                           std::to_string(one.index) + ".json";
        std::string temporary = path + ".tmp";
        std::ofstream(temporary) << "{\"pid\": " << getpid() << ", \"tid\": " << one.tid.load() << ", \"thread\": "
            << one.index << ", \"final\": " << (final ? "true" : "false") << ", \"broker\": false, \"relayed_local\": "
            << one.relayed << ", \"published\": 0, \"publish_deliveries\": 0, \"delivered_from_broker\": 0, "
            << "\"own_from_broker\": 0, \"joined_per_room\": " << joined << ", \"published_per_room\": {}, "
            << "\"own_port\": " << one.own_port << "}";
        std::rename(temporary.c_str(), path.c_str());
    };
    // One endpoint's handlers and its listening socket, on its home thread's io_context; false (said on stderr) when
    // it cannot listen.
    auto set_up = [&](server &s, shard *home, const std::string &port) {
        s.clear_access_channels(websocketpp::log::alevel::all);
        s.clear_error_channels(websocketpp::log::elevel::all);
        s.get_alog().set_ostream(&std::cerr);
        s.get_elog().set_ostream(&std::cerr);
        websocketpp::lib::error_code ec;
        s.init_asio(&home->io, ec);  // the error-code form: a throw on thread i would end the process, not say why
        if (ec) {
            std::fprintf(stderr, "cpp_ws_server: cannot start Asio for port %s: %s\n", port.c_str(),
                         ec.message().c_str());
            return false;
        }
        s.set_reuse_addr(true);
        if constexpr (tls) s.set_tls_init_handler([&context](websocketpp::connection_hdl) { return context; });
        // the handlers of a connection run on its home thread, the only one that touches home->rooms
        s.set_validate_handler([&, home](websocketpp::connection_hdl hdl) {
            std::string resource = s.get_con_from_hdl(hdl)->get_resource();
            std::string name = resource.substr(0, resource.find('?'));
            if (name.empty()) name = "/";
            auto here = home->rooms.try_emplace(name).first;
            home->room_of_member[hdl] = here;
            home->waiting.insert(hdl);
            std::lock_guard<std::mutex> guard(rooms_mutex);
            auto &room = rooms[name];
            if (!room.threads) room.threads = std::make_shared<std::atomic<long>>(0);
            if (here->second.members.empty()) room.threads->fetch_add(1);
            room.members.insert(Member{home, hdl});
            here->second.threads = room.threads;
            here->second.members.insert(hdl);
            home->joined[name] += 1;
            not_open[hdl];
            return true;
        });
        s.set_open_handler([&, home](websocketpp::connection_hdl hdl) {
            home->waiting.erase(hdl);
            std::lock_guard<std::mutex> guard(rooms_mutex);
            send_what_waited(s, not_open, hdl);
        });
        auto leave = [&, home](websocketpp::connection_hdl hdl) {
            home->waiting.erase(hdl);
            auto member = home->room_of_member.find(hdl);
            if (member == home->room_of_member.end()) return;  // never accepted: in no room
            auto here = member->second;
            home->room_of_member.erase(member);
            std::string name = here->first;
            here->second.members.erase(hdl);
            bool last_here = here->second.members.empty();
            if (last_here) home->rooms.erase(here);
            std::lock_guard<std::mutex> guard(rooms_mutex);
            not_open.erase(hdl);
            auto room = rooms.find(name);
            if (room == rooms.end()) return;
            room->second.members.erase(Member{home, hdl});
            if (last_here) room->second.threads->fetch_sub(1);
            if (room->second.members.empty()) rooms.erase(room);
        };
        s.set_close_handler(leave);  // after an error too
        s.set_fail_handler(leave);   // a handshake that failed after it was accepted
        s.set_message_handler([&, home](websocketpp::connection_hdl hdl, typename server::message_ptr msg) {
            auto member = home->room_of_member.find(hdl);
            if (member == home->room_of_member.end()) return;
            auto &here = member->second->second;
            for (auto &other : here.members) {  // this thread's members: no lock, unless one is not open yet
                if (!(other.owner_before(hdl) || hdl.owner_before(other))) continue;
                home->relayed += 1;
                if (!home->waiting.empty() && home->waiting.count(other)) {
                    std::lock_guard<std::mutex> guard(rooms_mutex);
                    auto waiting = not_open.find(other);
                    if (waiting != not_open.end()) {
                        waiting->second.push_back(msg);
                        continue;
                    }
                }
                websocketpp::lib::error_code ignored;
                home->endpoint.send(other, msg, ignored);
            }
            // relaxed: a member that joins on another thread meanwhile may miss this message, as it would by a lock
            if (!here.threads || here.threads->load(std::memory_order_relaxed) < 2) return;
            std::vector<Member> elsewhere;
            {
                std::lock_guard<std::mutex> guard(rooms_mutex);
                auto room = rooms.find(member->second->first);
                if (room == rooms.end()) return;
                for (auto &other : room->second.members) {
                    if (other.on == home) continue;
                    auto waiting = not_open.find(other.hdl);
                    if (waiting == not_open.end()) {
                        elsewhere.push_back(other);
                    } else {
                        waiting->second.push_back(msg);
                        home->relayed += 1;
                    }
                }
            }
            for (auto &other : elsewhere) {  // a member on another thread: its connection posts the write there
                websocketpp::lib::error_code ignored;
                other.on->endpoint.send(other.hdl, msg, ignored);
                home->relayed += 1;
            }
        });
        s.listen(args.host, port, ec);
        if (!ec) s.start_accept(ec);
        if (ec)
            std::fprintf(stderr, "cpp_ws_server: cannot listen on %s:%s: %s\n", args.host.c_str(), port.c_str(),
                         ec.message().c_str());
        return !ec;
    };
    // Thread i makes shard i and its endpoint on PORT+1+i (thread 0 also the shared port's), says whether it listens,
    // and runs its io_context once every thread listens; if one cannot, none runs and the server exits 1.
    std::mutex start_mutex;
    std::condition_variable start_changed;
    long made = 0;
    bool failed = false, go = false;
    auto make = [&](long i) {
        auto one = std::make_unique<shard>();
        one->index = i;
        one->own_port = base + 1 + i;
        one->tid = static_cast<long>(syscall(SYS_gettid));
        bool listening = set_up(one->endpoint, one.get(), std::to_string(one->own_port));
        if (listening && i == 0) {
            one->shared = std::make_unique<server>();
            listening = set_up(*one->shared, one.get(), args.port);
        }
        std::lock_guard<std::mutex> guard(start_mutex);
        shards[i] = std::move(one);
        made += 1;
        failed = failed || !listening;
        start_changed.notify_all();
    };
    std::vector<std::thread> more;
    for (long i = 1; i < count; ++i)
        more.emplace_back([&, i] {
            make(i);
            {
                std::unique_lock<std::mutex> lock(start_mutex);
                start_changed.wait(lock, [&] { return go || (made == count && failed); });
                if (!go) return;
            }
            auto guard = asio::make_work_guard(shards[i]->io);  // a thread with no connection yet keeps running
            shards[i]->io.run();
        });
    make(0);
    {
        std::unique_lock<std::mutex> lock(start_mutex);
        start_changed.wait(lock, [&] { return made == count; });
        go = !failed;
        start_changed.notify_all();
    }
    if (!go) {
        for (auto &thread : more) thread.join();
        return 1;
    }

    // SIGTERM/SIGINT: stop accepting, close every connection, and stop every loop 300 ms later at the latest.
    asio::signal_set signals(shards[0]->io, SIGTERM, SIGINT);
    asio::steady_timer deadline(shards[0]->io);
    signals.async_wait([&](const asio::error_code &, int) {
        std::vector<Member> everyone;
        {
            std::lock_guard<std::mutex> guard(rooms_mutex);
            for (auto &room : rooms)
                everyone.insert(everyone.end(), room.second.members.begin(), room.second.members.end());
        }
        for (auto &one : shards)  // each endpoint on its own thread, where its accepts run
            asio::post(one->io, [raw = one.get()] {
                websocketpp::lib::error_code ignored;
                raw->endpoint.stop_listening(ignored);
                if (raw->shared) raw->shared->stop_listening(ignored);
            });
        for (auto &member : everyone)  // on the member's own thread, as its other handlers run
            asio::post(member.on->io, [member] {
                websocketpp::lib::error_code ignored;
                member.on->endpoint.close(member.hdl, websocketpp::close::status::going_away, "", ignored);
            });
        deadline.expires_after(std::chrono::milliseconds(300));
        deadline.async_wait([&](const asio::error_code &) {
            for (auto &one : shards) one->io.stop();
        });
    });

    for (auto &one : shards)  // each thread writes its counts (with the id it took in make) once its loop runs
        asio::post(one->io, [&, raw = one.get()] { write_counts(*raw, false); });
    asio::post(shards[0]->io, [&] { write_info(args); });
    std::fprintf(stderr, "cpp-websocketpp server listening on %s:%s, thread i on port %ld+i\n", args.host.c_str(),
                 args.port.c_str(), base + 1);
    shards[0]->io.run();
    for (long i = 1; i < count; ++i) shards[i]->io.stop();
    for (auto &thread : more) thread.join();
    for (auto &one : shards) write_counts(*one, true);
    return 0;
}

int main(int argc, char **argv) {
    const char *program = "cpp_ws_server";
    Args args;
    std::string loop = "auto";
    for (int i = 1; i < argc; i += 2) {
        std::string flag = argv[i];
        if (flag == "--worker-ports") {  // the one flag without a value
            args.worker_ports = true;
            i -= 1;
            continue;
        }
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

    // A measurement switch (benchmarks/thread_tax.py): start and join one thread first, so that a one-thread server
    // runs as a process with threads does. glibc's malloc and libstdc++'s shared_ptr counts skip their locks and
    // atomic instructions while a process has never had a second thread (__libc_single_threaded).
    const char *leave_single_threaded = std::getenv("PINGPONG_CPP_LEAVE_SINGLE_THREADED");
    if (leave_single_threaded && std::string(leave_single_threaded) == "1") {
        std::thread([] {}).join();
        std::fprintf(stderr, "cpp_ws_server: PINGPONG_CPP_LEAVE_SINGLE_THREADED=1: started and joined one thread\n");
    }

    bool tls = !args.cert.empty(), on = args.compression == "on";
    if (args.worker_ports) {
        if (tls) return on ? serve_by_thread<with_deflate<websocketpp::config::asio_tls>, true>(args)
                           : serve_by_thread<websocketpp::config::asio_tls, true>(args);
        return on ? serve_by_thread<with_deflate<websocketpp::config::asio>, false>(args)
                  : serve_by_thread<websocketpp::config::asio, false>(args);
    }
    if (tls) return on ? serve<with_deflate<websocketpp::config::asio_tls>, true>(args)
                       : serve<websocketpp::config::asio_tls, true>(args);
    return on ? serve<with_deflate<websocketpp::config::asio>, false>(args)
              : serve<websocketpp::config::asio, false>(args);
}
