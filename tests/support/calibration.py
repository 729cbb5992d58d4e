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


def endpoint_campaign(base_url: str, *, model: str, arrival: str, requests_per_point: int, warmup_requests: int,
                      processes: int) -> str:
    """A sweep-only campaign text whose one arm, cal, is an OpenAI-compatible endpoint served by the
    calibration server at `base_url` (`model` and `arrival` as YAML flow mappings)."""
    return f"""
name: calibration
model: {model}
protocol:
  stages: [sweep]
  canaries: {{run_sweep_on_hold: true}}
  workload: {{kind: synthetic, prompt_tokens: 16, output_tokens: 4}}
  arrival: {arrival}
  context_length: 512
  requests_per_point: {requests_per_point}
  repetitions: 1
  warmup_requests: {warmup_requests}
  loadgen: {{processes: {processes}}}
arms:
  - name: cal
    engine: {{kind: openai_endpoint, base_url: "{base_url}/v1", served_model: calibration}}
"""
