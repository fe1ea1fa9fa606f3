"""The engine's single-purpose pieces on hand-checked cases: ledger range text, waiting queue order,
timer heap, and the recorded series of a small run."""
from __future__ import annotations

import numpy as np

from hpctwin.twin import ledger as ledger_mod
from hpctwin.twin.ledger import Ledger
from hpctwin.twin.ranges import ranges_of_sorted
from hpctwin.twin.timers import Timers
from hpctwin.twin.waitqueue import WaitQueue

from .helpers import simulate


def test_ledger_batch_text_equals_per_job_formatting(monkeypatch):
    monkeypatch.setattr(ledger_mod, "FLUSH_EVERY", 7)           # several batches, the last one partial
    rng = np.random.default_rng(3)
    arrays = [np.array([5]), np.array([0, 1, 2, 3]), np.array([0, 2, 3, 9, 10, 11, 20]), np.array([7, 8])]
    arrays += [np.unique(rng.integers(0, 64, size=int(k))) for k in rng.integers(1, 20, size=40)]
    led = Ledger([0.0] * len(arrays))
    for j, a in enumerate(arrays):
        led.close(j, 0.0, 1.0, 1.0, a, end=1.0)
    text = led.node_text()
    assert text[:4] == ["5", "0-3", "0,2-3,9-11,20", "7-8"]
    assert text == [ranges_of_sorted(a) for a in arrays]


def test_ledger_segments_sum_held_and_queued():
    led = Ledger([10.0])
    led.open(0, 15.0)                          # waited 5 s
    led.close(0, 15.0, 40.0, 25.0, np.array([1]))
    led.interrupted(0, 15.0, 40.0, np.array([1]))
    led.requeued(0, 40.0)
    led.open(0, 100.0)                         # waited 60 s more
    led.close(0, 100.0, 130.0, 30.0, np.array([2, 3]), end=130.0)
    assert (led.start[0], led.end[0], led.held[0], led.queued[0], led.work_done[0]) == (15.0, 130.0, 55.0, 65.0, 55.0)
    assert led.segments == [(0, 15.0, 40.0, "1")] and led.node_text() == ["2-3"]


def test_waitqueue_prefix_and_middle_removal_and_requeue_keys():
    q = WaitQueue(10)
    for j in range(6):
        q.submit(j)
    q.merge()
    q.remove({0, 1})                            # a prefix: the head moves
    assert q.arr.tolist() == [2, 3, 4, 5]
    q.remove({4})                               # the middle
    assert q.arr.tolist() == [2, 3, 5]
    q.requeue(0, "back", 6)                     # after every job submitted so far
    q.requeue(1, "front", 6)                    # before every waiting job
    q.requeue(4, "front", 6)                    # front requeues among themselves in requeue order
    q.submit(6)
    q.merge()
    assert q.arr.tolist() == [1, 4, 2, 3, 5, 0, 6]
    assert [q.waiting[j] for j in range(8)] == [1, 1, 1, 1, 1, 1, 1, 0]


def test_waitqueue_grows_in_place_across_many_merges():
    q = WaitQueue(1000)
    for j in range(1000):
        q.submit(j)
        if j % 3 == 0:
            q.merge()
        if j % 5 == 4:
            q.merge()
            q.remove({int(q.arr[0])})
    q.merge()
    assert q.arr.tolist() == list(range(200, 1000))


def test_timers_one_live_entry_per_owner():
    t = Timers(2)                              # models 0 and 1, the policy is owner 2
    t.set(0, 50.0)
    t.set(1, 30.0)
    t.set(2, 40.0)
    t.set(1, 60.0)                             # replaces model 1's 30 s
    assert t.next_time(True) == 40.0 and t.next_time(False) == 40.0
    assert t.models_due(45.0) == [] and t.policy_due(45.0) and t.wake is None
    assert t.next_time(True) == 50.0 and t.models_due(60.0) == [0, 1]
    assert t.next_time(True) == float("inf")


def test_recorded_series_of_a_small_run():
    # 4 units: job A (2 units, 0-10), job B (4 units, submitted at 1, waits to 10, runs to 15)
    res, _, _ = simulate([(1, 0, 10, 2, None), (2, 1, 5, 4, None)], 4, scheduler="fcfs")
    assert res.change_t.tolist() == [0.0, 1.0, 10.0, 15.0]
    assert res.change_busy.tolist() == [2, 2, 4, 0] and res.change_queue.tolist() == [0, 1, 0, 0]
    assert res.held.tolist() == [10.0, 5.0] and res.queued.tolist() == [0.0, 9.0]
    assert res.nodes == ["0-1", "0-3"] and res.passes == 3 and res.events == 4
