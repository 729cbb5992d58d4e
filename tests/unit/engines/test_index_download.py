"""The pinned download from a package index's simple API, served over loopback by a real HTTP
server: the JSON and HTML pages, a file whose bytes are not the pinned ones, a file not listed, and
the sdist step that uses it."""
from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from stackbook.engines.index_download import PinnedFile, download_pinned, file_url
from stackbook.engines.install import InstallContext
from stackbook.engines.llama_cpp import LLAMA_CPP_SDIST, LLAMA_CPP_VERSION
from stackbook.engines.llama_cpp_build import fetch_sdist

PAYLOAD = b"not really a tarball, but bytes with a digest\n" * 1000
NAME = "tiny_pkg-1.0.tar.gz"
PINNED = PinnedFile("Tiny.Pkg", "1.0", NAME, hashlib.sha256(PAYLOAD).hexdigest())


class Index(BaseHTTPRequestHandler):
    """/simple/tiny-pkg/ as JSON (PEP 691) or HTML (PEP 503), and the file under /files/."""
    html_only = False
    payload = PAYLOAD

    def do_GET(self):
        if self.path == "/simple/tiny-pkg/":
            if self.html_only or "json" not in self.headers.get("Accept", ""):
                body = f'<html><body><a href="../../files/{NAME}#sha256=00">{NAME}</a></body></html>'.encode()
                kind = "text/html"
            else:
                body = json.dumps({"meta": {"api-version": "1.0"}, "name": "tiny-pkg",
                                   "files": [{"filename": NAME, "url": f"../../files/{NAME}",
                                              "hashes": {"sha256": PINNED.sha256}}]}).encode()
                kind = "application/vnd.pypi.simple.v1+json"
        elif self.path == f"/files/{NAME}":
            body, kind = self.payload, "application/octet-stream"
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def index():
    """A loopback index; yields (simple API url, handler class to adjust)."""
    handler = type("TestIndex", (Index,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/simple", handler
    server.shutdown()
    server.server_close()


def test_the_page_name_is_the_normalised_project_name():
    assert PINNED.page == "tiny-pkg"
    assert PinnedFile("llama_cpp.Python", "1", "x", "y").page == "llama-cpp-python"


def test_a_json_page_and_an_html_page_give_the_same_absolute_address():
    page = "https://index.example/simple/tiny-pkg/"
    as_json = json.dumps({"files": [{"filename": "other-1.0.tar.gz", "url": "https://x/other"},
                                    {"filename": NAME, "url": f"../../files/{NAME}"}]})
    as_html = f'<a href="https://x/other-1.0.tar.gz">o</a><a href="../../files/{NAME}#sha256=ab">{NAME}</a>'
    want = f"https://index.example/files/{NAME}"
    assert file_url(page, as_json, "application/vnd.pypi.simple.v1+json", NAME) == want
    assert file_url(page, as_html, "text/html; charset=utf-8", NAME) == want
    assert file_url(page, as_html, "text/html", "absent-2.0.tar.gz") is None


@pytest.mark.parametrize("html_only", [False, True])
def test_the_pinned_file_is_written_whole_from_either_kind_of_page(index, tmp_path, html_only):
    url, handler = index
    handler.html_only = html_only
    path = download_pinned(PINNED, tmp_path / "downloads", index=url)
    assert path == tmp_path / "downloads" / NAME
    assert path.read_bytes() == PAYLOAD
    assert [p.name for p in path.parent.iterdir()] == [NAME]


def test_bytes_that_are_not_the_pinned_ones_are_refused_and_not_kept(index, tmp_path):
    url, handler = index
    handler.payload = PAYLOAD + b"tampered"
    with pytest.raises(ValueError, match="not the pinned"):
        download_pinned(PINNED, tmp_path, index=url)
    assert list(tmp_path.iterdir()) == []


def test_a_file_the_index_does_not_list_is_an_os_error(index, tmp_path):
    url, _ = index
    with pytest.raises(OSError, match="does not list tiny_pkg-2.0.tar.gz"):
        download_pinned(PinnedFile("tiny-pkg", "2.0", "tiny_pkg-2.0.tar.gz", "0" * 64), tmp_path, index=url)
    with pytest.raises(OSError):
        download_pinned(PinnedFile("absent", "1.0", NAME, PINNED.sha256), tmp_path, index=url)


def test_the_sdist_step_reads_the_index_named_by_pip_index_url(index, tmp_path, monkeypatch):
    url, _ = index
    monkeypatch.setenv("PIP_INDEX_URL", url)
    ctx = InstallContext(cache=tmp_path, python="python3")
    ctx.downloads.mkdir()
    (ctx.downloads / NAME).write_bytes(b"a partial file from an earlier, broken download")
    path = fetch_sdist(ctx, PINNED)
    assert path.read_bytes() == PAYLOAD
    assert fetch_sdist(ctx, PINNED) == path  # cached and whole: not fetched again


def test_the_pinned_sdist_is_the_pinned_version():
    assert LLAMA_CPP_SDIST.version == LLAMA_CPP_VERSION
    assert LLAMA_CPP_SDIST.filename == f"llama_cpp_python-{LLAMA_CPP_VERSION}.tar.gz"
    assert LLAMA_CPP_SDIST.page == "llama-cpp-python"
    assert len(LLAMA_CPP_SDIST.sha256) == 64
