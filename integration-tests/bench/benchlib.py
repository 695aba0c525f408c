"""Helpers the Python benchmarks share."""

import socket


def free_port():
    """A loopback TCP port free right now (the caller binds it soon)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
