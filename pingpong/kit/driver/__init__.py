"""The ping-pong measurement shared by the Python client drivers (clients/*.py): core, and one module per workload.

core holds the CLI contract, connections, the start gate, the stall watchdog and the report's parts; main.main()
parses the flags and hands the run to one workload's measure(open_connection, args): ping_pong, open_loop,
handshakes, broadcast or idle_holders. node/driver/ is the Node.js twin, module for module. This package imports only
pingpong.contract, pingpong.versions, pingpong.kit.*, the standard library and the client libraries; a workload
module imports core, never another one, and neither core nor a workload module imports main (this package
re-exports it for the clients: driver.main(...)).
"""

from pingpong.kit.driver.core import (Connection, DriverError, MessageQueue, client_ssl_context, encode_histogram,
                                      library_versions, run_on_loop, running_loop_name, socket_details)
from pingpong.kit.driver.main import main

__all__ = ["Connection", "DriverError", "MessageQueue", "client_ssl_context", "encode_histogram", "library_versions",
           "main", "run_on_loop", "running_loop_name", "socket_details"]
