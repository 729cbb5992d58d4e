"""papermill reads a notebook's jupytext source as it reads its .ipynb twin.

papermill parses its input as JSON, so `papermill notebooks/10_sizing.py out.ipynb` would stop in
NotJSONError. This I/O handler, registered through papermill's `papermill.io` entry points for
the local path prefixes pyproject.toml lists (papermill picks a handler by the path's start),
hands papermill the notebook a `.py` percent source describes (the notebook the runner itself
executes) and leaves every other path to papermill's own local handler.
"""
from __future__ import annotations

from pathlib import Path

from papermill.iorw import LocalHandler

class JupytextSourceHandler(LocalHandler):
    """papermill's local handler, except that a `.py` input is read as a jupytext percent source."""

    def read(self, path):
        if str(path).endswith(".py"):
            if not Path(path).exists():
                raise FileNotFoundError(f"no notebook source at {path}; the shipped ones are notebooks/NN_name.py "
                                        "and their .ipynb twins")
            import nbformat  # papermill imports this module with its entry points: keep that light

            from stackbook.notebook_sources import read_source

            return nbformat.writes(read_source(path))
        return super().read(path)

    def write(self, buf, path):
        if str(path).endswith(".py"):
            raise ValueError(f"papermill output {path}: write the executed notebook to a .ipynb path; a .py "
                             "source holds no outputs")
        return super().write(buf, path)


JUPYTEXT_SOURCES = JupytextSourceHandler()  # papermill registers handler objects, not classes
