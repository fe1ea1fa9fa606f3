"""A third-party scheduler for the plug-in tests: largest job first, no backfilling, written
against the documented contract only (no project base class)."""


class LargestFirst:
    name = "largest-first"

    def bind(self, jobs, cluster):
        self.jobs = jobs

    def schedule(self, now, queue, cluster):
        free = cluster.free
        out = []
        for j in sorted(queue.tolist(), key=lambda j: (-int(self.jobs.procs[j]), j)):
            if self.jobs.procs[j] <= free:
                out.append(j)
                free -= int(self.jobs.procs[j])
            else:
                break
        return out


class Interrupting:
    """Raises KeyboardInterrupt at its 50th pass (simulates Ctrl-C in the middle of a run)."""

    name = "interrupting"

    def __init__(self):
        self.passes = 0

    def bind(self, jobs, cluster):
        self.jobs = jobs

    def schedule(self, now, queue, cluster):
        self.passes += 1
        if self.passes == 50:
            raise KeyboardInterrupt
        return [j for j in queue.tolist()[:1] if self.jobs.procs[j] <= cluster.free]
