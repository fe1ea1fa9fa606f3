"""A client that never reads its input (args: PIDFILE [SECONDS]): it sleeps, its stdin pipe fills."""
import sys
import time

from _pids import record

record(sys.argv[1])
time.sleep(float(sys.argv[2]) if len(sys.argv) > 2 else 60.0)
