"""The waiting queue of the engine: job indices in queue order, handed to the policy at each pass.

Without requeues the queue order is the arrival (= index) order and the queue is a sorted numpy
array plus the submissions not yet merged into it, so long queues cost vectorised copies, not
Python loops. After the first requeue (a failure model's interrupted job) every entry also has an
order key: ``front`` requeues go before every waiting job (among themselves in requeue order),
``back`` requeues after every job submitted so far (among themselves in requeue order). A held job
a model submits at run time (`twin.control`) enters with a ``back`` key: arrival order.
"""
from __future__ import annotations

import numpy as np

#: order key of the first front requeue (every arrival key, an index, is larger)
FRONT = -1.0e15


class QueueError(RuntimeError):
    """An impossible queue operation (more back requeues between two submissions than keys)."""


class WaitQueue:
    """Waiting jobs of a run of ``n`` jobs. ``arr`` is the queue the policy sees (int64, queue
    order; do not modify); ``waiting[j]`` is 1 while job ``j`` waits."""

    __slots__ = ("arr", "key", "new", "waiting", "_buf", "_head", "_tail", "_front", "_back", "_back_ptr")

    def __init__(self, n: int):
        self._buf = np.empty(64, dtype=np.int64)   # arrival-order mode: ``arr`` is ``_buf[_head:_tail]``
        self._head = self._tail = 0
        self.arr = self._buf[0:0]
        self.key: np.ndarray | None = None     # order keys, once a job was requeued
        self.new: list[int] = []               # submissions not yet merged into ``arr``
        self.waiting = bytearray(n)
        self._front = 0
        self._back = 0
        self._back_ptr = -1

    def __len__(self) -> int:
        return len(self.arr) + len(self.new)

    def first(self) -> int:
        return int(self.arr[0]) if len(self.arr) else self.new[0]

    def submit(self, j: int) -> None:
        self.new.append(j)
        self.waiting[j] = 1

    def merge(self) -> None:
        """Append the pending submissions (in arrival order) to ``arr``: in place in a buffer with
        room to grow (amortised O(submissions), not O(queue))."""
        new = self.new
        if not new:
            return
        k = len(new)
        if self.key is not None:
            self.arr = np.concatenate((self.arr, np.asarray(new, dtype=np.int64)))
            self.key = np.concatenate((self.key, np.asarray(new, dtype=np.float64)))
        else:
            if self._tail + k > len(self._buf):
                m = len(self.arr)
                buf = np.empty(max(64, 2 * (m + k)), dtype=np.int64)
                buf[:m] = self.arr
                self._buf, self._head, self._tail = buf, 0, m
            self._buf[self._tail:self._tail + k] = new
            self._tail += k
            self.arr = self._buf[self._head:self._tail]
        new.clear()

    def remove(self, started: set[int]) -> None:
        """Take the started jobs out of the queue (a prefix of it in O(1))."""
        waiting = self.waiting
        for j in started:
            waiting[j] = 0
        arr, k = self.arr, len(started)
        if self.key is None:
            # the queue is sorted (arrival = index order): a prefix is dropped by moving the head,
            # other jobs are deleted by position
            if k == 1:
                j = next(iter(started))
                if arr[0] == j:
                    self._head += 1
                    self.arr = self._buf[self._head:self._tail]
                    return
                i = int(np.searchsorted(arr, j))
                rest = np.concatenate((arr[:i], arr[i + 1:]))
            else:
                order = sorted(started)
                if arr[k - 1] == order[-1] and arr[0] == order[0]:   # sorted distinct: a prefix
                    self._head += k
                    self.arr = self._buf[self._head:self._tail]
                    return
                rest = np.delete(arr, np.searchsorted(arr, order))
            self._buf, self._head, self._tail = rest, 0, len(rest)
            self.arr = rest
        else:
            keep = ~np.isin(arr, np.fromiter(started, dtype=np.int64, count=k))
            self.arr = arr[keep]
            self.key = self.key[keep]

    def requeue(self, j: int, where: str, submitted: int) -> None:
        """Put interrupted job ``j`` back: ``where`` "front" or "back"; ``submitted``: jobs submitted
        so far (the back key sits after the last of them). Called with no pending submissions."""
        if self.key is None:
            self.key = self.arr.astype(np.float64)
        if where == "front":
            self._front += 1
            k = FRONT + self._front
        else:
            if submitted != self._back_ptr:
                self._back_ptr, self._back = submitted, 0
            self._back += 1
            if self._back >= 1_000_000:
                raise QueueError("more than 10^6 back-requeues between two submissions")
            k = (submitted - 1) + 0.5 + self._back * 1e-7
        pos = int(np.searchsorted(self.key, k))
        self.arr = np.insert(self.arr, pos, j)
        self.key = np.insert(self.key, pos, k)
        self.waiting[j] = 1
