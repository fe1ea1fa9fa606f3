"""A client writing NBYTES of lines to its stderr before anything else, then FCFS; with a STATUS
it prints a last stderr line and exits with that status instead (args: PIDFILE NBYTES [STATUS])."""
import sys

from _pids import record, serve_fcfs

record(sys.argv[1])
line = "chatter " + "y" * 1015 + "\n"
for _ in range(int(sys.argv[2]) // len(line)):
    sys.stderr.write(line)
sys.stderr.flush()
if len(sys.argv) > 3:
    sys.stderr.write("fatal: out of ideas\n")
    sys.exit(int(sys.argv[3]))
serve_fcfs()
