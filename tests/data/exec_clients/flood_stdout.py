"""A client answering its first message with NBYTES of 'x' and no newline, then sleeping
(args: PIDFILE NBYTES)."""
import os
import sys
import time

from _pids import record

record(sys.argv[1])
sys.stdin.readline()
left, block = int(sys.argv[2]), b"x" * (1 << 20)
try:
    while left > 0:
        left -= os.write(1, block[:left])
except BrokenPipeError:
    pass
time.sleep(60)
