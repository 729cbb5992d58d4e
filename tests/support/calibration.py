"""Calibration servers started for a test (or a module) and stopped after it, whatever its outcome."""
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from stackbook.harness.calibration_server import CalibrationServer

StartServer = Callable[..., CalibrationServer]


@contextmanager
def calibration_servers() -> Iterator[StartServer]:
    """Yields `start(server_class=CalibrationServer, **options)`, which starts a server in a thread
    with CalibrationServer's options (pacing, api_key, slow_headers_s); on exit every one is stopped."""
    started: list[CalibrationServer] = []

    def start(server_class: type[CalibrationServer] = CalibrationServer, **options) -> CalibrationServer:
        server = server_class(**options).start_in_thread()
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()
