"""A run started with SIGINT ignored (`nohup ... &`, a CI runner, a service manager) still stops its
children with SIGINT, and what a test leaves running dies with it."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import psutil

from testkit.processes import children, kill_children

# A parent started with SIGINT ignored starts a Python child (as a test starts `personae worker`),
# sends it SIGINT once it runs, and says how the child ended.
PARENT = textwrap.dedent(
    """
    import signal, subprocess, sys
    from testkit.processes import reset_signal_dispositions
    if sys.argv[1] == "reset":
        reset_signal_dispositions()
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; print('up', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )
    child.stdout.readline()
    child.send_signal(signal.SIGINT)
    try:
        child.wait(timeout=10)
        print("stopped")
    except subprocess.TimeoutExpired:
        child.kill()
        print("kept running")
    """
)


def run_parent(mode: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", PARENT, mode],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # as `nohup ... &` starts it
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_children_of_a_run_that_ignores_sigint_stop_on_sigint_once_the_run_resets_it() -> None:
    assert run_parent("keep") == "kept running"  # the hang tests/conftest.py prevents
    assert run_parent("reset") == "stopped"


def test_children_left_running_are_killed() -> None:
    before = children()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    assert sleeper.pid in children() - before
    kill_children(children() - before)
    assert not psutil.pid_exists(sleeper.pid)  # killed and reaped (psutil reaps its own children)
    sleeper.wait()  # so that its Popen knows it ended (else it warns, when collected, of a running child)
