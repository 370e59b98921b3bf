"""WebSocket ping-pong benchmark suite: the contract's vocabulary, the kit inside each process, the harness."""

SUITE_VERSION = "0.1.0"  # the same as package.json's "version" (a test holds them together)
