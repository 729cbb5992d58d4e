"""One engine's operating-system process: started as the leader of its own process group, its
output copied line by line to a log file and to memory, stopped as a whole group. It knows
nothing of HTTP or of engine kinds; the adapter (engines/base.py) tells it what to run."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

from stackbook.engines.process_group import die_with_parent, group_alive, signal_group
from stackbook.locations import symbolic


def _close_quietly(f) -> None:
    try:
        f.close()
    except OSError:
        pass  # what could not be flushed is still in log_lines


class EngineProcess:
    """The process handle: start, alive, stop, and the log it wrote."""

    def __init__(self, log_path: Path | None = None):
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None
        self.log_lines: list[str] = []
        self._log_thread: threading.Thread | None = None
        self.started_at: float | None = None
        self.exit_code: int | None = None

    def start(self, command: list[str], env: dict[str, str], cwd: Path | None) -> None:
        if self.log_path:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self.log_path.write_text("")
        self.started_at = time.monotonic()
        # A new session makes the engine the leader of its own process group: stop() can then
        # end its whole tree (vLLM forks an engine-core process) and nothing else.
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env={**os.environ, **env}, cwd=cwd,
                                     start_new_session=True, text=True, errors="replace", bufsize=1,
                                     preexec_fn=die_with_parent)
        self._log_thread = threading.Thread(target=self._pump_log, daemon=True)
        self._log_thread.start()

    def _pump_log(self) -> None:
        """Copy the engine's output to its log file and memory. A log file that cannot be written
        (a full disk) is given up, not the reading: an unread pipe would stall the engine."""
        out = open(self.log_path, "a") if self.log_path else None
        try:
            for line in self.proc.stdout:
                line = symbolic(line)
                self.log_lines.append(line)
                if out:
                    try:
                        out.write(line)
                        out.flush()
                    except OSError:
                        out = _close_quietly(out)
        finally:
            if out:
                _close_quietly(out)

    def is_alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def exited(self) -> int | None:
        """The exit code once the process has ended (its log read to the end), else None."""
        if self.proc is None or self.proc.poll() is None:
            return None
        self.exit_code = self.proc.returncode
        self.join_log()
        return self.exit_code

    def stop(self, grace_s: float = 20.0) -> int | None:
        """SIGTERM the process group, SIGKILL what is left after the grace period."""
        if self.proc is None:
            return None
        pgid = self.proc.pid
        if self.proc.poll() is None:
            signal_group(pgid, signal.SIGTERM)
            signal_group(pgid, signal.SIGCONT)  # a frozen (SIGSTOPped) engine must wake to act on it
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                signal_group(pgid, signal.SIGKILL)
                self.proc.wait(10)
        # Children that outlived the leader (same group) get the same treatment.
        deadline = time.monotonic() + grace_s
        while group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if group_alive(pgid):
            signal_group(pgid, signal.SIGKILL)
        self.exit_code = self.proc.returncode
        self.join_log()
        return self.exit_code

    def join_log(self) -> None:
        if self._log_thread:
            self._log_thread.join(timeout=5)

    def log_tail(self, n: int = 25) -> str:
        return "".join(self.log_lines[-n:])

    def find_in_log(self, pattern: str, flags=0) -> re.Match | None:
        rx = re.compile(pattern, flags)
        for line in self.log_lines:
            m = rx.search(line)
            if m:
                return m
        return None
