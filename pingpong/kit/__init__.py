"""The implementation kit: what a server or client process imports (drivers, server support, payloads, TLS)."""
