"""A report as a reader sees it: headless Chromium driven over the Chrome DevTools protocol (a
websocket and a few JSON messages), to check that figures are drawn and links resolve, and to
take screenshots. Uses the system's Chromium (Debian: apt-get install chromium); nothing is
downloaded."""
from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import unquote, urlparse

from pydantic import BaseModel

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL_HINT = "install Chromium first: apt-get install chromium (Debian/Ubuntu), or run make setup as root"


def find_chromium() -> str | None:
    """The Chromium executable: $STACKBOOK_CHROMIUM, else the first of CANDIDATES on PATH."""
    if os.environ.get("STACKBOOK_CHROMIUM"):
        return os.environ["STACKBOOK_CHROMIUM"]
    return next((p for p in map(shutil.which, CANDIDATES) if p), None)


class ImageState(BaseModel):
    src: str
    natural_width: int
    natural_height: int
    alt: str = ""


class LinkState(BaseModel):
    href: str
    text: str
    resolves: bool


class Layout(BaseModel):
    """Where things sit on the page as drawn: the decision table's top (CSS px from the page's
    top; None when the page has none), code cells a reader can see, images wider than the
    element that holds them, and tables a reader must scroll sideways (each by its first row's
    text), wider than their box or than the window."""
    decision_top: float | None
    visible_code_cells: int
    overflowing_images: list[str]
    overflowing_tables: list[str] = []


class PageReport(BaseModel):
    """What the browser saw: every image with its decoded size and alt text, every local link and
    whether its target exists, and the layout."""
    title: str
    images: list[ImageState]
    links: list[LinkState]
    layout: Layout | None = None

    @property
    def page_links(self) -> list[LinkState]:
        """Links to the rendered notebook pages (.html) of the run."""
        return [link for link in self.links if urlparse(link.href).path.endswith(".html")]

    @property
    def broken_images(self) -> list[ImageState]:
        return [i for i in self.images if i.natural_width == 0 or i.natural_height == 0]

    @property
    def broken_links(self) -> list[LinkState]:
        return [link for link in self.links if not link.resolves]


_PAGE_STATE = """JSON.stringify({
  title: document.title,
  images: Array.from(document.images).map(i => ({src: i.src.slice(0, 80), natural_width: i.naturalWidth,
                                                 natural_height: i.naturalHeight, alt: i.alt || ""})),
  links: Array.from(document.querySelectorAll('a[href]')).map(a => ({href: a.href, text: a.textContent.trim()}))
})"""


# The decision table is the summary's (id decision-table); a code cell shows as an input area with
# a height (markdown cells have input areas too: only code cells count); an image overflows when it
# is wider than its parent's content box, a table when its content is wider than its own box (it
# scrolls inside itself) or it reaches past the window.
_LAYOUT = """JSON.stringify({
  decision_top: (t => t ? t.getBoundingClientRect().top + window.scrollY : null)(
      document.getElementById('decision-table')),
  visible_code_cells: Array.from(document.querySelectorAll(
                           '.jp-CodeCell .jp-InputArea, .jp-CodeCell .highlight, pre code.language-python'))
                           .filter(e => e.offsetHeight > 0 && getComputedStyle(e).visibility !== 'hidden').length,
  overflowing_images: Array.from(document.images).filter(i => {
      const box = i.parentElement.getBoundingClientRect(), r = i.getBoundingClientRect();
      return r.right > box.right + 1 || r.left < box.left - 1 || r.right > document.documentElement.clientWidth + 1;
  }).map(i => (i.alt || i.src).slice(0, 80)),
  overflowing_tables: Array.from(document.querySelectorAll('table')).filter(t =>
      t.scrollWidth > t.clientWidth + 1 || t.getBoundingClientRect().right > document.documentElement.clientWidth + 1
  ).map(t => (t.rows[0] || t).innerText.replace(/\\s+/g, ' ').trim().slice(0, 80))
})"""


def _local_target(href: str) -> Path | None:
    """A file:// link's target on disk (its #fragment dropped); None for web and in-page links."""
    url = urlparse(href)
    return Path(unquote(url.path)) if url.scheme == "file" else None


class Chromium:
    """One headless Chromium with one page, closed on exit."""

    def __init__(self, executable: str | None = None, width: int = 1200, height: int = 900):
        self.executable = executable or find_chromium()
        if not self.executable:
            raise RuntimeError(f"no Chromium found ({', '.join(CANDIDATES)}): {INSTALL_HINT}")
        self.width, self.height = width, height
        self._ids = itertools.count(1)

    def __enter__(self) -> Chromium:
        import websocket

        # its helpers may still write as it exits
        self._profile = tempfile.TemporaryDirectory(prefix="stackbook-chromium-", ignore_cleanup_errors=True)
        self._proc = subprocess.Popen(
            [self.executable, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--no-first-run", "--no-default-browser-check", "--hide-scrollbars", "--remote-debugging-port=0",
             f"--user-data-dir={self._profile.name}", f"--window-size={self.width},{self.height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = Path(self._profile.name) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.__exit__(None, None, None)
                raise RuntimeError(f"{self.executable} did not open its DevTools port within 60 s")
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        pages = []
        while not pages and time.monotonic() < deadline:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
                pages = [t for t in json.load(r) if t["type"] == "page"]
            time.sleep(0.1) if not pages else None
        self._ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=60, suppress_origin=True)
        self._call("Page.enable")
        return self

    def __exit__(self, *exc) -> None:
        if getattr(self, "_ws", None) is not None:
            self._ws.close()
        self._proc.terminate()
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._profile.cleanup()

    def _call(self, method: str, wait_event: str | None = None, **params) -> dict:
        """Send one command; return its result (after `wait_event` arrives, when given)."""
        msg_id = next(self._ids)
        self._ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        result, seen_event = None, wait_event is None
        while result is None or not seen_event:
            msg = json.loads(self._ws.recv())
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error'].get('message')}")
                result = msg["result"]
            elif wait_event and msg.get("method") == wait_event:
                seen_event = True
        return result

    def open(self, path: str | os.PathLike) -> None:
        """Load a local file and wait until it and its images have loaded."""
        self._call("Page.navigate", wait_event="Page.loadEventFired", url=Path(path).resolve().as_uri())

    def evaluate(self, expression: str):
        out = self._call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in out:
            raise RuntimeError(f"page script failed: {out['exceptionDetails'].get('text')}")
        return out["result"].get("value")

    def inspect(self) -> PageReport:
        state = json.loads(self.evaluate(_PAGE_STATE))
        links = []
        for link in state["links"]:
            target = _local_target(link["href"])
            if target is not None:
                links.append(LinkState(**link, resolves=target.exists()))
        return PageReport(title=state["title"], images=[ImageState(**i) for i in state["images"]], links=links,
                          layout=Layout(**json.loads(self.evaluate(_LAYOUT))))

    def screenshot(self, out: str | os.PathLike, height: int | None = None, from_id: str | None = None) -> Path:
        """A PNG of `height` CSS pixels of the page (all of it when None), from the element with id
        `from_id` (a section heading: nbconvert gives each an id) or from the top."""
        full = self.evaluate("document.documentElement.scrollHeight")
        top = 0
        if from_id:
            top = self.evaluate(f"(e => e ? e.getBoundingClientRect().top + window.scrollY : -1)"
                                f"(document.getElementById({json.dumps(from_id)}))")
            if top < 0:
                raise RuntimeError(f"no element with id {from_id!r} in the page (a heading's id is its text, "
                                   "spaces as '-')")
        clip = {"x": 0, "y": top, "width": self.width, "height": min(height or full, full - top), "scale": 1}
        data = self._call("Page.captureScreenshot", format="png", clip=clip, captureBeyondViewport=True)["data"]
        out = Path(out)
        out.write_bytes(base64.b64decode(data))
        return out


def inspect_page(path: str | os.PathLike) -> PageReport:
    """Open one local HTML file in headless Chromium and report its images and local links."""
    with Chromium() as browser:
        browser.open(path)
        return browser.inspect()
