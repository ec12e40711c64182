"""No process a test starts outlives the test process, however it ends (tests/support/processes.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from tests.support.processes import ROOT, wait_until

# A stand-in test process: marks itself the owner as tests/conftest.py does, starts a grandchild in a session of
# its own (as a launched system's processes are), says the grandchild's pid, then waits to be killed.
OWNER = """
import atexit, os, signal, subprocess, sys, time
from tests.support.processes import kill_leftovers, own_children
own_children()
atexit.register(kill_leftovers)
signal.signal(signal.SIGTERM, lambda signum, _: (kill_leftovers(), os._exit(128 + signum)))
child = subprocess.Popen(
    [sys.executable, "-c", "import subprocess, sys, time; "
     "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'], start_new_session=True); "
     "print(p.pid, flush=True); time.sleep(300)"],
    stdout=subprocess.PIPE, start_new_session=True, text=True,
)
print(child.pid, child.stdout.readline().strip(), flush=True)
time.sleep(300)
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_killed_test_process_takes_what_it_started_with_it():
    owner = subprocess.Popen([sys.executable, "-c", OWNER], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    pids = [int(pid) for pid in owner.stdout.readline().split()]
    assert len(pids) == 2 and all(alive(pid) for pid in pids)
    # Not ours to reap, so a killed one stays a zombie only until its parent (or init) reaps it: "alive" skips those.
    os.kill(owner.pid, signal.SIGTERM)
    assert owner.wait(30) == 128 + signal.SIGTERM
    wait_until(lambda: not any(alive(pid) for pid in pids), 10, "the owner's descendants to be killed")
