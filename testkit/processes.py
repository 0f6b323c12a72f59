"""Child processes that stop when their test (or bench) says so, and die with it otherwise."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable
from pathlib import Path

import psutil


def reset_signal_dispositions() -> None:
    """Give SIGINT its default handler if the run was started with it ignored (`nohup ... &`, some CI
    runners and service managers): children inherit an ignored signal across exec, and a `personae
    worker` started so would never stop on the SIGINT its test sends. (SIGHUP stays as it is: `nohup`
    means it.)"""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    for number in (signal.SIGTERM, signal.SIGQUIT):
        if signal.getsignal(number) is signal.SIG_IGN:
            signal.signal(number, signal.SIG_DFL)


def children() -> set[int]:
    """This process's descendants: from the kernel's lists of each thread's children where it keeps
    them (a few small reads), else psutil's scan of every process on the machine (5.8 ms among 170
    processes; the suite asks twice per test)."""
    if not _KERNEL_LISTS_CHILDREN:
        return {child.pid for child in psutil.Process().children(recursive=True)}
    found: set[int] = set()
    parents = [os.getpid()]
    while parents:
        for child in _children_of(parents.pop()):
            if child not in found:
                found.add(child)
                parents.append(child)
    return found


# Linux with CONFIG_PROC_CHILDREN: /proc/PID/task/TID/children.
_KERNEL_LISTS_CHILDREN = Path(f"/proc/self/task/{os.getpid()}/children").exists()


def _children_of(pid: int) -> list[int]:
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:  # it ended meanwhile
        return []
    pids: list[int] = []
    for thread in threads:
        try:
            pids.extend(map(int, Path(f"/proc/{pid}/task/{thread}/children").read_text().split()))
        except OSError:  # the thread ended meanwhile
            continue
    return pids


def kill_children(pids: Iterable[int]) -> None:
    """Kill these processes (a test's children left running by its failure or its timeout)."""
    processes = []
    for pid in pids:
        try:
            process = psutil.Process(pid)
            process.kill()
            processes.append(process)
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(processes, timeout=10)
