"""FCFS for the first N messages, then exit with STATUS without answering (args: PIDFILE N STATUS)."""
import sys

from _pids import record, serve_fcfs

record(sys.argv[1])
n, status = int(sys.argv[2]), int(sys.argv[3])
serve_fcfs(stop_at=n, status=status)
