"""A client that reads every message and never answers (args: PIDFILE [ignore-term]; with
``ignore-term`` it ignores SIGTERM and stays after its input closes, so only SIGKILL ends it)."""
import signal
import sys
import time

from _pids import record

record(sys.argv[1])
stubborn = sys.argv[2:] == ["ignore-term"]
if stubborn:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
for _ in sys.stdin:
    pass
if stubborn:
    time.sleep(60)
