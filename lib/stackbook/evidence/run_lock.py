"""One writer per run directory: run.lock, held for the life of a run.

The kernel holds the lock (flock on the open file), so a writer that dies, however it dies,
releases it; the file's text (pid, host, start time, command) names the holder to whoever is
refused, and tells the next writer that a crashed one left the file behind."""
from __future__ import annotations

import atexit
import fcntl
import json
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass

from stackbook.evidence.rundir import RunDir


class RunRefused(RuntimeError):
    """This run directory cannot be written by this process now; the message says why and what to do."""


class RunLocked(RunRefused):
    """Another live process writes this run directory."""


def holder_record(command: list[str] | None = None) -> dict:
    """What a lock file says about its holder."""
    return {"pid": os.getpid(), "host": socket.gethostname(), "started_unix": round(time.time(), 3),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "command": " ".join(command if command is not None else ["stackbook", *sys.argv[1:]])}


def describe_holder(holder: dict | None) -> str:
    if not holder:
        return "a process that has not yet written its details"
    return (f"pid {holder.get('pid')} on host {holder.get('host')} since {holder.get('started')} "
            f"({holder.get('command')!r})")


def _read_holder(fd: int) -> dict | None:
    os.lseek(fd, 0, os.SEEK_SET)
    text = os.read(fd, 1 << 16).decode(errors="replace").strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return {"unreadable": text[:500]}


def _refusal(run: RunDir, holder: dict | None) -> RunLocked:
    pid = (holder or {}).get("pid")
    stop = f"stop it (kill {pid}) " if pid else "stop it "
    return RunLocked(f"{run} is being written by {describe_holder(holder)}; one process writes a run at a time: "
                     f"wait for that run to end, or {stop}and then continue with: stackbook run --resume {run}")


def _not_writable(run: RunDir, err: OSError) -> RunRefused:
    return RunRefused(f"{run}: the run directory cannot be written ({err.strerror or err}); give a writable "
                      "outputs/ (check the mount and its free space), or run from a checkout that can write it")


@dataclass
class RunLock:
    """A held run.lock. `taken_over` is what a dead writer's lock file said, when this run took
    it over (a run that ended cleanly leaves no file behind)."""
    run: RunDir
    fd: int
    taken_over: dict | None = None

    def manifest_note(self) -> dict:
        """The manifest's record of a takeover: {} when the lock was free."""
        if self.taken_over is None:
            return {}
        return {"lock_taken_over": {**self.taken_over, "taken_over_unix": round(time.time(), 3),
                                    "note": "the run's previous writer died holding run.lock; this run took it over"}}

    def release(self) -> None:
        """Remove the file, then let go: whoever waits re-checks that the file it locked is still
        the one on disk, so removing it first cannot let two writers in."""
        if self.fd < 0:
            return
        try:
            self.run.lock.unlink(missing_ok=True)
        except OSError:
            pass  # a read-only directory keeps the file; the kernel lock still goes with the close
        os.close(self.fd)
        self.fd = -1

    def __enter__(self) -> "RunLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def hold_run(run_dir: RunDir | str | os.PathLike, command: list[str] | None = None) -> RunLock:
    """Take run.lock for this process, or raise RunLocked naming the live holder. A file left by
    a dead writer is taken over (RunLock.taken_over says whose it was)."""
    run = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    while True:
        try:
            fd = os.open(run.lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise _not_writable(run, err) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise _refusal(run, holder) from None
        try:
            current = os.stat(run.lock).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            current = False
        if current:
            break
        os.close(fd)  # locked a file its holder removed as it let go: lock the one on disk now
    previous = _read_holder(fd)
    try:
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, (json.dumps(holder_record(command)) + "\n").encode())
        os.fsync(fd)
    except OSError as err:
        os.close(fd)
        raise _not_writable(run, err) from None
    lock = RunLock(run, fd, previous)
    atexit.register(lock.release)  # a run that stops on an error still lets go; only a killed one leaves the file
    return lock


def stop_with_parent(interval_s: float = 1.0) -> None:
    """In a process that writes a run for the runner that started it (a notebook kernel): exit as
    soon as that runner is gone. A killed runner lets go of run.lock; an orphan kernel going on
    appending to the run would be a second writer beside the resume that takes the lock next."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(interval_s)
            if os.getppid() != parent:
                os._exit(70)  # no cleanup to run: the records written so far are complete lines

    threading.Thread(target=watch, name="stop-with-runner", daemon=True).start()


def refuse_if_held(run_dir: RunDir | str | os.PathLike) -> None:
    """Raise RunLocked when a live process holds the run's lock; otherwise do nothing (the file,
    if any, is left for hold_run to take over)."""
    run = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    try:
        fd = os.open(run.lock, os.O_RDONLY)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise _refusal(run, _read_holder(fd)) from None
    finally:
        os.close(fd)
