"""A client that forks a grandchild sleeping 60 s, then (args: PIDFILE MODE):

* ``fail``: exits with status 4 before answering; the grandchild keeps the pipes open;
* ``fail-detached``: the same, but the grandchild closes its stdin, stdout and stderr first;
* ``fcfs``: answers as FCFS and exits at SIMULATION_ENDS, leaving the grandchild running.
"""
import os
import sys
import time

from _pids import record, serve_fcfs

pidfile, mode = sys.argv[1], sys.argv[2]
record(pidfile)
if os.fork() == 0:
    record(pidfile, "grandchild")
    if mode == "fail-detached":
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
    time.sleep(60)
    os._exit(0)
if mode.startswith("fail"):
    sys.stderr.write("forker: giving up\n")
    sys.exit(4)
serve_fcfs()
