"""WebSocket ping-pong benchmark: every server x every client. See README.md, or run with --help."""

import sys

from pingpong.harness.commands.cli import main

if __name__ == "__main__":
    sys.exit(main())
