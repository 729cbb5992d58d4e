"""A file of a package, pinned by its sha256, read straight from the package index's simple API.

`pip download` of an sdist first prepares the package's metadata, which runs its build back end in
an isolated environment: for llama-cpp-python's 76 MB sdist that took 53 s and 50 CPU-seconds on
two cores, against 0.3 s for the file itself (benchmarks/setup_steps.py), on the set-up's longest
path. The digest is pinned, so the file is the one pip would have checked. Where the index cannot be
read this way (no route to it, a mirror without the simple API) the caller falls back to pip."""
from __future__ import annotations

import hashlib
import json
import os
import re
import ssl
import urllib.request
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urldefrag, urljoin

PYPI_SIMPLE = "https://pypi.org/simple"
# PEP 691's JSON first, PEP 503's HTML where the index serves only that.
ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
CHUNK = 1 << 20


@dataclass(frozen=True)
class PinnedFile:
    """One file of one release on the index, and the sha256 it must have."""
    project: str
    version: str
    filename: str
    sha256: str

    @property
    def page(self) -> str:
        """The project's name as the simple API spells its page (PEP 503 normalisation)."""
        return re.sub(r"[-_.]+", "-", self.project).lower()


def index_url() -> str:
    """The index pip would read first: $PIP_INDEX_URL where set, else PyPI."""
    return os.environ.get("PIP_INDEX_URL", PYPI_SIMPLE).rstrip("/")


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.hrefs.extend(v for k, v in attrs if k == "href" and v)


def file_url(page_url: str, body: str, content_type: str, filename: str) -> str | None:
    """The absolute address of `filename` on a simple-API project page (JSON or HTML); None if absent."""
    if "json" in content_type:
        hrefs = [f["url"] for f in json.loads(body).get("files", []) if f.get("filename") == filename]
    else:
        parser = _Links()
        parser.feed(body)
        hrefs = [h for h in parser.hrefs if urldefrag(h).url.rstrip("/").rsplit("/", 1)[-1] == filename]
    return urljoin(page_url, urldefrag(hrefs[0]).url) if hrefs else None


def _open(url: str, timeout: float, accept: str | None = None):
    cafile = os.environ.get("PIP_CERT") or None  # the bundle pip is told to trust, if any
    context = ssl.create_default_context(cafile=cafile) if url.startswith("https") else None
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    return urllib.request.urlopen(request, timeout=timeout, context=context)


def download_pinned(pinned: PinnedFile, folder: Path, index: str | None = None, timeout: float = 60) -> Path:
    """`pinned` written into `folder` once its digest matches. Raises OSError where the index cannot
    be read or does not list the file, ValueError where the bytes are not the pinned ones."""
    page_url = f"{index or index_url()}/{pinned.page}/"
    with _open(page_url, timeout, ACCEPT) as reply:
        body = reply.read().decode("utf-8", "replace")
        url = file_url(reply.geturl(), body, reply.headers.get("Content-Type", ""), pinned.filename)
    if url is None:
        raise OSError(f"{page_url} does not list {pinned.filename}")
    folder.mkdir(parents=True, exist_ok=True)
    dest, partial = folder / pinned.filename, folder / f"{pinned.filename}.part"
    digest = hashlib.sha256()
    try:
        with _open(url, timeout) as reply, open(partial, "wb") as out:
            while chunk := reply.read(CHUNK):
                digest.update(chunk)
                out.write(chunk)
        if digest.hexdigest() != pinned.sha256:
            raise ValueError(f"{pinned.filename} from {url} has sha256 {digest.hexdigest()}, not the pinned "
                             f"{pinned.sha256}")
        os.replace(partial, dest)
    finally:
        partial.unlink(missing_ok=True)
    return dest
