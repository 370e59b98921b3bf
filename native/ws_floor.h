/* What the protocol floor's server and client share (RFC 6455, no library): SHA-1 and base64 for the opening
 * handshake's Sec-WebSocket-Accept key, the frame header both sides write, and the checks on a frame header both
 * sides read. Each side includes it once; everything is static.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define WS_MAX_MESSAGE (64u * 1024 * 1024) /* as the raw-TCP floor's largest frame */
enum { WS_CONTINUATION = 0, WS_TEXT = 1, WS_BINARY = 2, WS_CLOSE = 8, WS_PING = 9, WS_PONG = 10 };

static uint32_t rotl(uint32_t x, int n) { return x << n | x >> (32 - n); }

/* SHA-1 (FIPS 180-4) of a short message: the 24-character key and the GUID. */
static void sha1(const unsigned char *data, size_t length, unsigned char digest[20]) {
    uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
    size_t total = (length + 9 + 63) / 64 * 64;
    for (size_t block = 0; block < total; block += 64) {
        uint32_t w[80], a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
        for (int i = 0; i < 64; i++) { /* the message, 0x80, zeros, then its length in bits, big-endian */
            size_t at = block + (size_t)i;
            unsigned char byte = at < length ? data[at] : at == length ? 0x80 : 0;
            if (at >= total - 8) byte = (unsigned char)((uint64_t)length * 8 >> (8 * (total - 1 - at)));
            if (i % 4 == 0) w[i / 4] = 0;
            w[i / 4] |= (uint32_t)byte << (24 - 8 * (i % 4));
        }
        for (int i = 16; i < 80; i++) w[i] = rotl(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
        for (int i = 0; i < 80; i++) {
            uint32_t f = i < 20 ? (b & c) | (~b & d) : i < 40 || i >= 60 ? b ^ c ^ d : (b & c) | (b & d) | (c & d);
            uint32_t k = i < 20 ? 0x5A827999 : i < 40 ? 0x6ED9EBA1 : i < 60 ? 0x8F1BBCDC : 0xCA62C1D6;
            uint32_t t = rotl(a, 5) + f + e + k + w[i];
            e = d, d = c, c = rotl(b, 30), b = a, a = t;
        }
        h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e;
    }
    for (int i = 0; i < 20; i++) digest[i] = (unsigned char)(h[i / 4] >> (24 - 8 * (i % 4)));
}

/* base64 (RFC 4648) with padding; out holds 4 * ceil(length / 3) + 1 bytes. */
static void base64(const unsigned char *data, size_t length, char *out) {
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < length; i += 3) {
        uint32_t v = (uint32_t)data[i] << 16 | (i + 1 < length ? (uint32_t)data[i + 1] << 8 : 0) |
                     (i + 2 < length ? data[i + 2] : 0);
        *out++ = digits[v >> 18];
        *out++ = digits[v >> 12 & 63];
        *out++ = i + 1 < length ? digits[v >> 6 & 63] : '=';
        *out++ = i + 2 < length ? digits[v & 63] : '=';
    }
    *out = 0;
}

/* Sec-WebSocket-Accept for a Sec-WebSocket-Key: base64(SHA-1(key + GUID)), 28 characters. */
static void accept_key(const char *key, size_t key_length, char out[29]) {
    unsigned char joined[128], digest[20];
    if (key_length > sizeof joined - sizeof WS_GUID) key_length = sizeof joined - sizeof WS_GUID;
    memcpy(joined, key, key_length);
    memcpy(joined + key_length, WS_GUID, sizeof WS_GUID - 1);
    sha1(joined, key_length + sizeof WS_GUID - 1, digest);
    base64(digest, 20, out);
}

/* The value of header `name` in an HTTP head (lines ending in CRLF, the first one the request or status line),
 * without surrounding spaces; NULL when absent. */
static const char *header_value(const char *head, const char *name, size_t *length) {
    size_t name_length = strlen(name);
    for (const char *line = strstr(head, "\r\n"); line && line[2] != '\r'; line = strstr(line + 2, "\r\n")) {
        const char *start = line + 2;
        if (strncasecmp(start, name, name_length) || start[name_length] != ':') continue;
        const char *value = start + name_length + 1, *end = strstr(value, "\r\n");
        while (*value == ' ' || *value == '\t') value++;
        while (end > value && (end[-1] == ' ' || end[-1] == '\t')) end--;
        *length = (size_t)(end - value);
        return value;
    }
    return NULL;
}

/* Whether a comma-separated header value lists `token`, case-insensitively ("keep-alive, Upgrade"). */
static int has_token(const char *value, size_t length, const char *token) {
    size_t token_length = strlen(token);
    for (size_t i = 0; i < length;) {
        while (i < length && (value[i] == ' ' || value[i] == '\t' || value[i] == ',')) i++;
        size_t end = i;
        while (end < length && value[end] != ',') end++;
        size_t last = end;
        while (last > i && (value[last - 1] == ' ' || value[last - 1] == '\t')) last--;
        if (last - i == token_length && !strncasecmp(value + i, token, token_length)) return 1;
        i = end;
    }
    return 0;
}

/* Writes a frame header (FIN set, no RSV bits) for a payload of `length` bytes, with the 4-byte mask when `mask`
 * is not NULL; returns its size (2 to 14 bytes). The lengths take the fewest bytes, as RFC 6455 5.2 requires. */
static size_t frame_header(unsigned char *out, int opcode, uint64_t length, const unsigned char *mask) {
    size_t n = 2;
    out[0] = (unsigned char)(0x80 | opcode);
    if (length < 126) out[1] = (unsigned char)length;
    else if (length <= 0xffff) {
        out[1] = 126;
        out[2] = (unsigned char)(length >> 8), out[3] = (unsigned char)length;
        n = 4;
    } else {
        out[1] = 127;
        for (int i = 0; i < 8; i++) out[2 + i] = (unsigned char)(length >> (56 - 8 * i));
        n = 10;
    }
    if (mask) {
        out[1] |= 0x80;
        memcpy(out + n, mask, 4);
        n += 4;
    }
    return n;
}

struct frame { int fin, opcode, masked; unsigned char mask[4]; uint64_t length; size_t header; };

/* Parses and checks the frame header at data[0..available): 0 when more bytes are needed, the header's size when
 * it is whole and valid, or -1 with *problem set (a close code and its reason). `masked` is what RFC 6455 requires
 * of the peer: set from a client, clear from a server. */
static int parse_frame_header(const unsigned char *data, size_t available, int masked, struct frame *f,
                              const char **problem) {
    if (available < 2) return 0;
    f->fin = data[0] >> 7, f->opcode = data[0] & 15, f->masked = data[1] >> 7;
    uint64_t length = data[1] & 127;
    size_t n = 2 + (length == 126 ? 2 : length == 127 ? 8 : 0) + (f->masked ? 4 : 0);
    if (data[0] & 0x70) return *problem = "RSV bits set without an extension", -1;
    if (f->opcode > WS_BINARY && f->opcode < WS_CLOSE) return *problem = "reserved data opcode", -1;
    if (f->opcode > WS_PONG) return *problem = "reserved control opcode", -1;
    if (f->masked != masked)
        return *problem = masked ? "unmasked frame from a client" : "masked frame from a server", -1;
    if (f->opcode >= WS_CLOSE && (!f->fin || length > 125)) return *problem = "fragmented or long control frame", -1;
    if (available < n) return 0;
    if (length == 126) {
        length = (uint64_t)data[2] << 8 | data[3];
        if (length < 126) return *problem = "16-bit length below 126", -1;
    } else if (length == 127) {
        length = 0;
        for (int i = 0; i < 8; i++) length = length << 8 | data[2 + i];
        if (length >> 63) return *problem = "64-bit length with its top bit set", -1;
        if (length <= 0xffff) return *problem = "64-bit length below 65536", -1;
    }
    if (length > WS_MAX_MESSAGE) return *problem = "frame larger than 64 MiB", -1;
    if (f->masked) memcpy(f->mask, data + n - 4, 4);
    f->length = length;
    f->header = n;
    return (int)n;
}

/* XORs data with the mask, starting at offset `from` of the payload. */
static void apply_mask(unsigned char *data, size_t length, const unsigned char mask[4], size_t from) {
    for (size_t i = 0; i < length; i++) data[i] ^= mask[(from + i) & 3];
}

/* Whether bytes are valid UTF-8 (RFC 3629: no overlongs, surrogates or code points above U+10FFFF). */
static int valid_utf8(const unsigned char *s, size_t length) {
    for (size_t i = 0; i < length;) {
        unsigned char c = s[i];
        size_t n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
        if (!n || i + n > length || (n == 2 && c < 0xc2) || c > 0xf4) return 0;
        for (size_t k = 1; k < n; k++)
            if ((s[i + k] & 0xc0) != 0x80) return 0;
        if ((n == 3 && c == 0xe0 && s[i + 1] < 0xa0) || (n == 3 && c == 0xed && s[i + 1] >= 0xa0) ||
            (n == 4 && c == 0xf0 && s[i + 1] < 0x90) || (n == 4 && c == 0xf4 && s[i + 1] >= 0x90))
            return 0;
        i += n;
    }
    return 1;
}
