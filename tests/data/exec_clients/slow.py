"""FCFS, answering each message after DELAY seconds (args: PIDFILE DELAY)."""
import sys

from _pids import record, serve_fcfs

record(sys.argv[1])
serve_fcfs(delay=float(sys.argv[2]))
