"""A hosted OpenAI-compatible API in its own dialect, against a local stand-in that behaves as
the hosted ones do: it refuses fields it does not know (400 "Unrecognized request argument"),
answers only under its own base path, wants its own auth header, and may speak TLS with a
self-signed certificate."""
import json
import socket
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from stackbook import __version__
from stackbook.config.protocol import Protocol
from stackbook.engines import EngineStartError
from stackbook.engines.openai_endpoint import OpenAIEndpoint, OpenAIEndpointAdapter
from stackbook.loadgen.drivers import Target, chat_once, run_sync, stream_chat
from stackbook.loadgen.workload import ApproximateTokenizer, PromptSpec

# The request fields of the OpenAI chat-completions API (a subset is enough to refuse extras).
OPENAI_FIELDS = {"model", "messages", "stream", "stream_options", "temperature", "top_p", "seed", "max_tokens",
                 "max_completion_tokens", "response_format", "tools", "tool_choice", "logit_bias", "n", "stop",
                 "frequency_penalty", "presence_penalty", "user"}
EXTRAS = {"top_k", "min_p", "repetition_penalty", "ignore_eos", "min_tokens"}


class HostedAPI:
    """Serves `<prefix>/models` and `<prefix>/chat/completions`; records every request.
    strict: refuse unknown fields as the hosted OpenAI API does; engine_fields: a self-hosted
    engine that honours ignore_eos/min_tokens (else replies stop after 3 tokens)."""

    def __init__(self, prefix="/v1", key=None, auth_header="authorization", auth_scheme="Bearer", strict=True,
                 engine_fields=False, query=None, tls=None, host="127.0.0.1"):
        self.prefix, self.key, self.strict, self.engine_fields = prefix, key, strict, engine_fields
        self.auth_header, self.auth_scheme, self.query = auth_header.lower(), auth_scheme, query
        self.requests: list[dict] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _send(self, status, payload: dict):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _check(self, body=None):
                api.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                     "body": body})
                if api.key:
                    want = f"{api.auth_scheme} {api.key}" if api.auth_scheme else api.key
                    if self.headers.get(api.auth_header) != want:
                        self._send(401, {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}})
                        return False
                path, _, query = self.path.partition("?")
                if api.query is not None and query != api.query:
                    self._send(404, {"error": {"message": f"query {query!r} not accepted"}})
                    return False
                if not path.startswith(api.prefix + "/"):
                    self._send(404, {"error": {"message": f"no route {path}"}})
                    return False
                return path[len(api.prefix):]

            def do_GET(self):
                route = self._check()
                if route is False:
                    return
                if route == "/models":
                    self._send(200, {"object": "list", "data": [{"id": "hosted-model", "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                route = self._check(body)
                if route is False:
                    return
                if route != "/chat/completions":
                    return self._send(404, {"error": {"message": "not found"}})
                unknown = sorted(set(body) - OPENAI_FIELDS - (EXTRAS if not api.strict else set()))
                if unknown:
                    return self._send(400, {"error": {"message": f"Unrecognized request argument supplied: "
                                                                 f"{unknown[0]}", "type": "invalid_request_error"}})
                n = body.get("max_tokens") or body.get("max_completion_tokens") or 16
                if not (api.engine_fields and body.get("ignore_eos")):
                    n = min(n, 3)  # "Say hi." ends early unless the end of sequence is ignored
                if not body.get("stream"):
                    return self._send(200, {"object": "chat.completion", "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": "hi " * n}, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 3, "completion_tokens": n, "total_tokens": n + 3}})
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                events = [{"choices": [{"index": 0, "delta": {"content": "hi "}, "finish_reason": None}]}] * n
                events += [{"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                           {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": n}}]
                for e in events:
                    data = b"data: " + json.dumps(e).encode() + b"\n\n"
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                data = b"data: [DONE]\n\n"
                self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))

        server_class = type("Server6", (ThreadingHTTPServer,), {"address_family": socket.AF_INET6}) \
            if ":" in host else ThreadingHTTPServer
        self.host = host
        self.server = server_class((host, 0), Handler)
        self.server.daemon_threads = True
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.scheme = "https" if tls else "http"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def root(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.server.server_address[1]}"

    def chats(self) -> list[dict]:
        return [r for r in self.requests if r["body"] is not None]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def serve():
    servers = []

    def make(**kw):
        servers.append(HostedAPI(**kw))
        return servers[-1]
    yield make
    for s in servers:
        s.close()


def adapter(base_url, **spec):
    p = Protocol(decoding={"preset": "greedy", "seed": 0})
    return OpenAIEndpointAdapter(OpenAIEndpoint(kind="openai_endpoint", base_url=base_url, startup_timeout_s=20,
                                                **spec), None, p, "hosted-model")


def target_of(a):
    d = a.protocol.decoding.resolved()
    return Target(a.base_url, a.served_name, a.sampling_fields(d), a.output_length_fields(8), a.headers(), 10.0,
                  **a.request_route())


def stream_one(target):
    async def go():
        async with target.stream_client() as client:
            return await stream_chat(client, target, PromptSpec(0, [{"role": "user", "content": "Say hi."}], 2, 8),
                                     ApproximateTokenizer(), base={"run_id": "t", "arm": "a", "point": "p",
                                                                   "phase": "measure", "concurrency": 1},
                                     t0=0.0, scheduled_s=0.0)
    return run_sync(go())


# -- the dialect ------------------------------------------------------------------------------

def test_a_hosted_api_gets_only_the_chat_completions_fields(serve):
    api = serve(prefix="/v1")
    a = adapter(api.root + "/v1")
    a.start()
    a.wait_ready()
    # The probe at readiness tried ignore_eos/min_tokens; the hosted API refused them.
    assert a.exact_length_accepted is False and a.length_control is None
    assert a.exact_length_reason.startswith("refused: HTTP 400") and "ignore_eos" in a.exact_length_reason
    rec = stream_one(target_of(a))
    assert rec.status == 200 and rec.error_class == "none", rec.error
    body = api.chats()[-1]["body"]
    assert set(body) == {"model", "messages", "stream", "stream_options", "temperature", "top_p", "seed",
                         "max_tokens"}
    assert body["temperature"] == 0.0 and body["top_p"] == 1.0 and body["seed"] == 0 and body["max_tokens"] == 8
    fields = a.honoured_decoding_fields(a.protocol.decoding.resolved())
    assert fields["sent"] == ["seed", "temperature", "top_p"]
    assert set(fields["not_sent"]) == {"top_k", "min_p", "repetition_penalty"}
    assert "engine_sampling" in fields["not_sent"]["top_k"]


def test_the_hosted_api_refuses_what_every_other_engine_is_sent(serve):
    """Why the dialect matters: the body an engine kind gets is refused by the hosted API."""
    api = serve()
    a = adapter(api.root + "/v1")
    t = target_of(a)
    t.sampling = {**t.sampling, "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0}
    reply = chat_once(t, [{"role": "user", "content": "Say hi."}])
    assert reply["error"].startswith("HTTP 400") and "Unrecognized request argument supplied: min_p" in reply["error"]


def test_extras_max_completion_tokens_and_extra_body_when_the_campaign_asks(serve):
    api = serve(strict=False)
    a = adapter(api.root + "/v1", engine_sampling=True, max_tokens_field="max_completion_tokens",
                extra_body={"user": "bench"}, exact_length="never")
    rec = stream_one(target_of(a))
    assert rec.error_class == "none" and rec.output_tokens_requested == 8
    body = api.chats()[-1]["body"]
    assert body["max_completion_tokens"] == 8 and "max_tokens" not in body
    assert body["top_k"] == 0 and body["min_p"] == 0.0 and body["repetition_penalty"] == 1.0
    assert body["user"] == "bench" and "ignore_eos" not in body and "min_tokens" not in body
    assert a.honoured_decoding_fields(a.protocol.decoding.resolved())["not_sent"] == {}


def test_a_self_hosted_endpoint_that_honours_ignore_eos_gets_exact_lengths(serve):
    api = serve(strict=False, engine_fields=True)
    a = adapter(api.root + "/v1")
    a.start()
    a.wait_ready()
    assert a.exact_length_accepted and a.length_control == "min_tokens and ignore_eos (honoured: exactly 24 tokens)"
    assert a.launch_record()["exact_length"] == {"mode": "probe", "accepted": True,
                                                 "reason": "honoured: exactly 24 tokens"}
    rec = stream_one(target_of(a))
    body = api.chats()[-1]["body"]
    assert body["ignore_eos"] is True and body["min_tokens"] == 8 and body["max_tokens"] == 8
    assert rec.output_tokens_server == 8
    # A notebook attaching later takes the finding back from engine.json.
    b = adapter(api.root + "/v1")
    b.restore({"launch": a.launch_record()})
    assert b.output_length_fields(5) == {"max_tokens": 5, "min_tokens": 5, "ignore_eos": True}


def test_an_endpoint_that_accepts_but_ignores_the_fields_is_not_length_controlled(serve):
    api = serve(strict=False, engine_fields=False)
    a = adapter(api.root + "/v1")
    a.start()
    a.wait_ready()
    assert not a.exact_length_accepted and a.length_control is None
    assert a.exact_length_reason == "accepted but not honoured: 3 tokens for 24 requested"
    assert a.output_length_fields(8) == {"max_tokens": 8}


# -- the base URL as given, auth and query --------------------------------------------------------

def test_the_base_path_is_kept_and_the_api_paths_appended(serve):
    api = serve(prefix="/v1beta/openai")
    a = adapter(api.root + "/v1beta/openai/", exact_length="never")
    a.start()
    a.wait_ready()
    rec = stream_one(target_of(a))
    assert rec.error_class == "none", rec.error
    assert [r["path"] for r in api.requests] == ["/v1beta/openai/models", "/v1beta/openai/chat/completions"]
    assert "error" not in chat_once(target_of(a), [{"role": "user", "content": "hi"}])
    assert api.requests[-1]["path"] == "/v1beta/openai/chat/completions"


def test_azure_style_api_key_header_and_api_version_query(serve, monkeypatch):
    monkeypatch.setenv("AZ_KEY", "az-secret")
    api = serve(prefix="/openai/deployments/gpt", key="az-secret", auth_header="api-key", auth_scheme=None,
                query="api-version=2024-10-21")
    a = adapter(api.root + "/openai/deployments/gpt", api_key_env="AZ_KEY", auth_header="api-key",
                auth_scheme=None, query={"api-version": "2024-10-21"}, exact_length="never")
    assert a.headers() == {"api-key": "az-secret"}
    a.start()
    a.wait_ready()
    rec = stream_one(target_of(a))
    assert rec.status == 200, rec.error
    assert api.requests[-1]["path"] == "/openai/deployments/gpt/chat/completions?api-version=2024-10-21"
    assert api.requests[-1]["headers"]["api-key"] == "az-secret"
    assert "authorization" not in api.requests[-1]["headers"]


def test_standard_headers_are_sent(serve):
    api = serve()
    a = adapter(api.root + "/v1", exact_length="never")
    stream_one(target_of(a))
    chat_once(target_of(a), [{"role": "user", "content": "hi"}])
    for r in api.requests:
        assert r["headers"]["user-agent"] == f"stackbook/{__version__}"
        assert r["headers"]["accept-encoding"] == "identity"


def test_401_during_readiness_fails_at_once_with_the_reason(serve, monkeypatch):
    import time
    monkeypatch.setenv("BAD_KEY", "wrong-key")
    api = serve(key="right-key")
    a = adapter(api.root + "/v1", api_key_env="BAD_KEY")
    a.start()
    began = time.monotonic()
    with pytest.raises(EngineStartError, match=r"refused the credentials with HTTP 401 .*Incorrect API key provided"):
        a.wait_ready()
    assert time.monotonic() - began < 5  # not the 20 s startup timeout
    assert len(api.requests) == 1


def test_403_during_readiness_fails_at_once(monkeypatch, start_calibration_server):
    from stackbook.harness.calibration_server import CalibrationServer

    class Forbidden(CalibrationServer):
        async def _route(self, method, path, headers, body, writer):
            self._respond(writer, 403, b'{"error": {"message": "this key may not use this model"}}')
            await writer.drain()
            return True
    s = start_calibration_server(Forbidden)
    a = adapter(s.base_url + "/v1")
    with pytest.raises(EngineStartError, match="HTTP 403 .*this key may not use this model"):
        a.wait_ready(timeout_s=20)


# -- spec validation ---------------------------------------------------------------------------

def test_spec_errors_name_the_field_and_the_fix(tmp_path):
    from pydantic import ValidationError
    with pytest.raises(ValidationError, match="engine.query"):
        OpenAIEndpoint(kind="openai_endpoint", base_url="https://x.example/v1?api-version=1")
    with pytest.raises(ValidationError, match="ca_bundle .* is not a file"):
        OpenAIEndpoint(kind="openai_endpoint", base_url="https://x.example/v1", ca_bundle=str(tmp_path / "none.pem"))
    with pytest.raises(ValidationError, match=r"extra_body may not set \['model'\]"):
        OpenAIEndpoint(kind="openai_endpoint", base_url="https://x.example/v1", extra_body={"model": "x"})


def test_an_ipv6_literal_host_is_reached_with_a_bracketed_host_header(serve):
    api = serve(host="::1")
    a = adapter(api.root + "/v1", exact_length="never")
    assert a.base_url == api.root and api.root.startswith("http://[::1]:")
    a.start()
    a.wait_ready()
    rec = stream_one(target_of(a))
    assert rec.status == 200 and rec.error_class == "none", rec.error
    assert "error" not in chat_once(target_of(a), [{"role": "user", "content": "hi"}])
    assert {r["headers"]["host"] for r in api.requests} == {f"[::1]:{api.server.server_address[1]}"}


def test_ipv6_literal_hosts_are_bracketed():
    a = adapter("http://[::1]:8123/v1")
    assert a.base_url == "http://[::1]:8123" and a.port == 8123 and not a.remote
    from stackbook.loadgen.http_client import StreamClient
    c = StreamClient(a.base_url)
    assert c.host == "::1" and c._head.startswith("Host: [::1]:8123\r\n")


# -- TLS, proxies, connection set-up --------------------------------------------------------------

@pytest.fixture(scope="module")
def self_signed(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1 and localhost, made with the openssl CLI."""
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True)
    return str(cert), str(key)


def test_tls_with_the_ca_bundle_succeeds(serve, self_signed):
    api = serve(tls=self_signed)
    a = adapter(api.root + "/v1", ca_bundle=self_signed[0], exact_length="never")
    assert api.root.startswith("https://")
    a.start()
    a.wait_ready()
    t = target_of(a)
    assert t.ca_bundle == self_signed[0]
    rec = stream_one(t)
    assert rec.status == 200 and rec.error_class == "none", rec.error
    # The first request on a new connection carries its set-up (TCP and the TLS handshake).
    assert rec.connect_s is not None and 0 < rec.connect_s < rec.end_s
    assert "error" not in chat_once(t, [{"role": "user", "content": "hi"}])


def test_tls_without_the_ca_bundle_fails_with_a_clear_error(serve, self_signed):
    api = serve(tls=self_signed)
    a = adapter(api.root + "/v1", exact_length="never")
    with pytest.raises(EngineStartError,
                       match="presented a certificate that was not verified .*self-signed "
                             "certificate.*engine.ca_bundle"):
        a.wait_ready(timeout_s=20)
    rec = stream_one(target_of(a))
    assert rec.error_class == "transport" and rec.status is None
    assert "TLS: the server's certificate was not verified" in rec.error and "engine.ca_bundle" in rec.error
    reply = chat_once(target_of(a), [{"role": "user", "content": "hi"}])
    assert reply["error"].startswith("TLS: the server's certificate was not verified")
    assert not [r for r in api.requests if r["body"] is not None]


def test_a_kept_alive_connection_records_no_set_up_time(start_calibration_server):
    s = start_calibration_server()
    t = Target(s.base_url, "calibration", {"temperature": 0.0}, {"max_tokens": 4}, timeout_s=10)

    async def two():
        async with t.stream_client() as client:
            out = []
            for i in range(2):
                out.append(await stream_chat(
                    client, t, PromptSpec(i, [{"role": "user", "content": "x"}], 1, 4), ApproximateTokenizer(),
                    base={"run_id": "t", "arm": "a", "point": "p", "phase": "measure", "concurrency": 1},
                    t0=0.0, scheduled_s=0.0))
            return out
    first, second = run_sync(two())
    assert first.connect_s is not None and first.connect_s > 0
    assert second.connect_s is None


def test_a_proxy_set_for_the_target_host_is_refused_by_name(monkeypatch):
    from stackbook.loadgen.http_client import ProxyRefused, StreamClient
    for var in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy",
                "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    with pytest.raises(ProxyRefused, match=r"a proxy \(http://proxy.corp:3128\) is set for api.example.com .*"
                                           r"NO_PROXY=api.example.com"):
        StreamClient("https://api.example.com/v1")
    a = adapter("https://api.example.com/v1")
    with pytest.raises(ProxyRefused):
        a.http_client()
    StreamClient("http://127.0.0.1:9/v1")  # loopback is never proxied
    monkeypatch.setenv("NO_PROXY", "example.com")
    StreamClient("https://api.example.com/v1")  # excluded by NO_PROXY: connects directly


# -- a hosted model end to end: source: remote, canaries against the local stand-in ---------------

def test_a_remote_model_runs_its_canaries_against_the_endpoint(serve, tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from stackbook.measure.sweep import tokenizer_for
    from stackbook.steps.canaries import arm_canaries
    from stackbook.steps.session import open_arm
    tok = Tokenizer(models.WordLevel({"[UNK]": 0, "hi": 1}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    (tmp_path / "tok").mkdir()
    tok.save(str(tmp_path / "tok" / "tokenizer.json"))
    api = serve(prefix="/v1beta/openai")
    campaign = tmp_path / "hosted.yaml"
    campaign.write_text(f"""
name: hosted-test
model: {{name: hosted, source: remote, served_name: hosted-model-2026, tokenizer_path: {tmp_path / 'tok'}}}
protocol:
  workload: {{kind: synthetic, prompt_tokens: 16, output_tokens: 8}}
  arrival: {{kind: closed_loop, concurrency: [1]}}
  context_length: 512
  stages: [canaries]
arms:
  - name: hosted
    engine: {{kind: openai_endpoint, base_url: "{api.root}/v1beta/openai", startup_timeout_s: 20}}
""")
    session = open_arm(str(campaign), run_dir=str(tmp_path / "run"), start_engine=True)
    try:
        assert session.adapter.artifacts is None
        assert not hasattr(tokenizer_for(session),
                           "approximate") and type(tokenizer_for(session)).__name__ == "Tokenizer"
        t = session.target()
        assert (t.base_url, t.chat_path, t.exact_lengths) == (api.root, "/v1beta/openai/chat/completions", False)
        out, table = arm_canaries(session, progress=False)
    finally:
        session.close()
    chats = api.chats()
    assert len(out["results"]) == len(table) > 3
    # Every canary request reached the API under the served name, in its dialect: none was refused.
    assert chats and {c["body"]["model"] for c in chats} == {"hosted-model-2026"}
    assert not [r for r in out["results"] if "Unrecognized request argument" in str(r.get("detail"))]
    assert {c["path"] for c in chats} == {"/v1beta/openai/chat/completions"}
    # Only the readiness probe tried the length fields (and was refused); no canary carries an extra.
    readiness, *canaries = chats
    assert readiness["body"]["ignore_eos"] is True and readiness["body"]["min_tokens"] == 24
    for c in canaries:
        assert not (EXTRAS & set(c["body"])), c["body"]
    assert out["probe"]["decoding_fields"]["sent"] == ["seed", "temperature", "top_p"]
    assert out["probe"]["output_length_honoured"] is False and out["probe"]["length_fields_sent"] == []


def test_requests_of_an_arm_without_length_control_are_not_counted_as_cut_short(serve):
    api = serve()
    a = adapter(api.root + "/v1", exact_length="never")
    t = target_of(a)
    t.exact_lengths = a.length_control is not None
    rec = stream_one(t)
    assert rec.output_tokens_server == 3 and rec.output_tokens_requested == 8
    assert rec.length_controlled is False


def test_the_hosted_campaign_validates_and_each_arm_speaks_its_providers_dialect(monkeypatch):
    from stackbook.config.loading import load_campaign
    from stackbook.engines import adapter_for
    c = load_campaign("campaigns/hosted-api.yaml")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "az-x")
    openai, azure = (adapter_for(c, arm) for arm in c.arms)
    assert openai.headers() == {"Authorization": "Bearer sk-x"} and azure.headers() == {"api-key": "az-x"}
    assert openai.request_route()["chat_path"] == "/v1/chat/completions"
    assert openai.request_route()["max_tokens_field"] == "max_completion_tokens"
    assert azure.request_route()["chat_path"] == ("/openai/deployments/gpt-4o-mini/chat/completions"
                                                  "?api-version=2024-10-21")
    assert openai.served_name == azure.served_name == "gpt-4o-mini" and openai.remote and azure.remote
