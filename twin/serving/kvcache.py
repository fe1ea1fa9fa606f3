"""Paged KV-cache block accounting, vLLM V1 style (``vllm/v1/core/kv_cache_manager.py``, ``block_pool.py``).

A request holds ``ceil(tokens / block_size)`` blocks. Allocation is all-or-nothing: `allocate` returns
False and changes nothing when the free pool cannot cover the new blocks (the scheduler then preempts).

With prefix caching on, every *full* block gets a chained hash of its tokens; a freed block keeps its
hash and stays findable until it is reused. Free blocks form one LRU queue: allocation takes from the
head, a finished or preempted request returns its blocks to the tail in reverse order (its last block
is evicted first), and a cache hit on a free block takes it out of the queue. A resumed (preempted)
request therefore recovers whatever of its own blocks was not evicted in the meantime.
"""
from __future__ import annotations

from collections import OrderedDict
from numbers import Integral

from .limits import MAX_BLOCK_SIZE, MAX_KV_BLOCKS


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


class BlockManager:
    """The KV blocks of one instance (``num_blocks`` of ``block_size`` tokens)."""

    def __init__(self, num_blocks: int, block_size: int = 16, caching: bool = False) -> None:
        for name, v in (("num_blocks", num_blocks), ("block_size", block_size)):
            if isinstance(v, bool) or not (isinstance(v, Integral) or (isinstance(v, float) and v.is_integer())):
                raise ValueError(f"KV cache: {name} = {v!r} is not a whole number")
        if num_blocks < 1:
            raise ValueError(f"KV cache has {num_blocks} blocks; at least 1 is needed (the model weights may "
                             "not leave room: check the GPU memory, gpu_memory_utilization and TP degree)")
        if num_blocks > MAX_KV_BLOCKS:
            raise ValueError(f"KV cache of {int(num_blocks):,} blocks: more than the limit of {MAX_KV_BLOCKS:,} "
                             "blocks per instance (the block table would take gigabytes; is num_gpu_blocks, the GPU "
                             "memory (GiB) or the block size wrong?)")
        if not 1 <= block_size <= MAX_BLOCK_SIZE:
            raise ValueError(f"KV cache: block_size = {block_size!r} tokens; give an integer in [1, "
                             f"{MAX_BLOCK_SIZE:,}] (vLLM's default is 16)")
        self.num_blocks = int(num_blocks)
        self.block_size = int(block_size)
        self.caching = bool(caching)
        self.blocks: dict[int, list[int]] = {}  # request uid -> block ids (caching) or [count] (no caching)
        self.free = self.num_blocks
        if self.caching:
            self._free_q: OrderedDict[int, None] = OrderedDict((b, None) for b in range(self.num_blocks))
            self._ref = [0] * self.num_blocks
            self._hash_of: list[object | None] = [None] * self.num_blocks
            self._by_hash: dict[object, int] = {}
            self.hits_tokens = 0
            self.queried_tokens = 0

    @property
    def used(self) -> int:
        return self.num_blocks - self.free

    def held(self, uid: int) -> int:
        b = self.blocks.get(uid)
        if b is None:
            return 0
        return len(b) if self.caching else b[0]

    # ---- prefix cache -------------------------------------------------------------------------
    def computed_blocks(self, hashes: list, num_tokens: int) -> list[int]:
        """Cached blocks that match the request's leading full blocks, at most ``num_tokens - 1`` tokens
        (vLLM always recomputes the last token)."""
        if not self.caching:
            return []
        limit = (num_tokens - 1) // self.block_size
        hit: list[int] = []
        for h in hashes[:limit]:
            b = self._by_hash.get(h)
            if b is None:
                break
            hit.append(b)
        self.queried_tokens += num_tokens
        self.hits_tokens += len(hit) * self.block_size
        return hit

    # ---- allocation ---------------------------------------------------------------------------
    def can_fit(self, uid: int, num_tokens: int, hit: list[int] | None = None) -> bool:
        """Would ``num_tokens`` tokens of the request fit (vLLM ``can_fit_full_sequence``)?"""
        return self._needed(uid, num_tokens, hit) <= self.free

    def _needed(self, uid: int, num_tokens: int, hit: list[int] | None) -> int:
        have = self.held(uid)
        n = cdiv(num_tokens, self.block_size) - have
        if hit:
            n -= len(hit)
            n += sum(1 for b in hit if self._ref[b] == 0)  # hits sitting in the free queue leave it
        return n

    def allocate(self, uid: int, num_tokens: int, hit: list[int] | None = None,
                 hashes: list | None = None, cache_upto: int = 0) -> bool:
        """Give the request slots for ``num_tokens`` tokens in total (after prefix hits ``hit``).

        ``hashes`` and ``cache_upto`` (tokens whose KV is final after this step) index the full blocks.
        """
        need = self._needed(uid, num_tokens, hit)
        if need > self.free:
            return False
        if not self.caching:
            if need > 0:
                self.blocks.setdefault(uid, [0])[0] += need
                self.free -= need
            elif uid not in self.blocks:
                self.blocks[uid] = [0]
            return True
        mine = self.blocks.setdefault(uid, [])
        if hit:
            for b in hit:
                if self._ref[b] == 0:
                    del self._free_q[b]
                    self.free -= 1
                self._ref[b] += 1
            mine.extend(hit)
        for _ in range(cdiv(num_tokens, self.block_size) - len(mine)):
            b, _ = self._free_q.popitem(last=False)
            h = self._hash_of[b]
            if h is not None:
                if self._by_hash.get(h) == b:
                    del self._by_hash[h]
                self._hash_of[b] = None
            self._ref[b] = 1
            self.free -= 1
            mine.append(b)
        if hashes is not None:
            self._index(mine, hashes, cache_upto)
        return True

    def _index(self, mine: list[int], hashes: list, upto_tokens: int) -> None:
        for i in range(min(upto_tokens // self.block_size, len(hashes), len(mine))):
            b = mine[i]
            if self._hash_of[b] is None:
                h = hashes[i]
                if h not in self._by_hash:
                    self._by_hash[h] = b
                self._hash_of[b] = h

    def release(self, uid: int) -> None:
        """Free the request's blocks (finished or preempted); cached blocks stay findable."""
        b = self.blocks.pop(uid, None)
        if b is None:
            return
        if not self.caching:
            self.free += b[0]
            return
        for blk in reversed(b):
            self._ref[blk] -= 1
            if self._ref[blk] == 0:
                self._free_q[blk] = None
                self.free += 1
