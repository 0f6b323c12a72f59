"""Child processes that stop when their test (or bench) says so, and die with it otherwise."""

from __future__ import annotations

import signal
from collections.abc import Iterable

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
    return {child.pid for child in psutil.Process().children(recursive=True)}


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
