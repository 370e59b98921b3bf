// What the server and the client both report: the compiler, and library versions read from the headers built with.
#pragma once
#include <asio/version.hpp>
#include <openssl/opensslv.h>
#include <websocketpp/extensions/permessage_deflate/enabled.hpp>
#include <websocketpp/version.hpp>
#include <zlib.h>

#include <string>

inline std::string runtime_json() {
#ifdef __clang__
    return "{\"name\": \"c++\", \"version\": \"clang " __clang_version__ "\"}";
#else
    return "{\"name\": \"c++\", \"version\": \"g++ " __VERSION__ "\"}";
#endif
}

inline std::string libraries_json() {
    using namespace websocketpp;
    std::string websocketpp = std::to_string(major_version) + "." + std::to_string(minor_version) + "." +
                              std::to_string(patch_version) + prerelease_flag;
    std::string asio = std::to_string(ASIO_VERSION / 100000) + "." + std::to_string(ASIO_VERSION / 100 % 1000) +
                       "." + std::to_string(ASIO_VERSION % 100);
    return "{\"websocketpp\": \"" + websocketpp + "\", \"asio\": \"" + asio + "\", \"openssl\": \"" +
           OPENSSL_VERSION_STR + "\", \"zlib\": \"" + ZLIB_VERSION + "\"}";
}

// The one-line usage error of the contract: exit 2, nothing on stdout.
[[noreturn]] inline void usage_error(const char *program, const std::string &message) {
    std::fprintf(stderr, "%s: %s\n", program, message.c_str());
    std::exit(2);
}

// websocketpp's stock configs refuse permessage-deflate (server) and never offer it (client); a config derived
// from one with this wrapper does both (--compression on).
template <typename base_config>
struct with_deflate : public base_config {
    typedef with_deflate type;
    typedef base_config base;
    struct permessage_deflate_config {};
    typedef websocketpp::extensions::permessage_deflate::enabled<permessage_deflate_config> permessage_deflate_type;
};
