"""The threads of one engine process, split by what they serve. An engine that serves HTTP inside
its compute process (llama-server) still runs its HTTP pool on threads of its own, started before
the model loads; their CPU time is host execution, the rest (the main loop and the compute
threads, born with or after the model) the engine's. Read from /proc: each thread's birth (in
clock ticks after boot) and its run time (schedstat, nanoseconds, so a sub-millisecond request's
parsing is not lost to the 10 ms tick); None where there is no /proc (macOS)."""
from __future__ import annotations

import os
from typing import NamedTuple


class ThreadTime(NamedTuple):
    tid: int
    born_after_s: float  # seconds after its process was born
    run_s: float  # CPU seconds run (user + system)


def _born_ticks(stat_path: str) -> int:
    with open(stat_path, encoding="ascii", errors="replace") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[19])  # after "pid (comm)": state is field 3, starttime field 22


def thread_times(pid: int) -> list[ThreadTime] | None:
    """Each thread of process `pid`: when it was born and the CPU seconds it ran."""
    tick = os.sysconf("SC_CLK_TCK")
    try:
        born0 = _born_ticks(f"/proc/{pid}/stat")
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    out = []
    for tid in tids:
        try:
            born = _born_ticks(f"/proc/{pid}/task/{tid}/stat")
            with open(f"/proc/{pid}/task/{tid}/schedstat", encoding="ascii") as f:
                run_ns = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended between the listing and the read
        out.append(ThreadTime(int(tid), (born - born0) / tick, run_ns / 1e9))
    return out


def http_threads(threads: list[ThreadTime], pid: int, born_within_s: float) -> list[ThreadTime]:
    """The threads that serve HTTP: every one but the main thread born within `born_within_s` of
    the process (before its model loaded). Pure."""
    return [t for t in threads if t.tid != pid and t.born_after_s <= born_within_s]
