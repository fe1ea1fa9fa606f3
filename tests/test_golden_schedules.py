"""Golden schedules computed by hand: exact start times for FCFS, EASY (both clauses), conservative
and the same-instant ordering rule. Each case's derivation is in its docstring."""
import math

import pytest

from tests.helpers import simulate, starts_by_id


def test_fcfs_vs_easy_both_clauses():
    """10 units. J1 (0, 10 s, 6u) runs [0,10). J2 (1, 5 s, 6u) waits: shadow 10, extra 10 - 6 = 4.
    EASY: J3 (2, 2 s, 2u) ends at 4 <= 10: backfilled at 2 (clause a). J4 (3, 20 s, 3u): 2 free at
    3; at 4 (J3 ends) 4 free, it ends after the shadow but 3 <= extra 4: starts at 4 (clause b),
    extra 1. J5 (5, 4 s, 1u) ends at 9 <= 10: starts at 5 (clause a). J6 (6, 3 s, 2u): no room
    until 10, when J2 takes 6 of the 7 free; J6 waits for J2's end at 15.
    FCFS: J2 and J3 at 10; J4 (3u) blocks until J3 ends at 12, J5 with it; J6 at 15 (J2 ends)."""
    rows = [(1, 0, 10, 6, 10), (2, 1, 5, 6, 5), (3, 2, 2, 2, 2), (4, 3, 20, 3, 20), (5, 5, 4, 1, 4),
            (6, 6, 3, 2, 3)]
    res, prep, _ = simulate(rows, 10, "easy")
    assert starts_by_id(res, prep) == {1: 0, 2: 10, 3: 2, 4: 4, 5: 5, 6: 15}
    res, prep, _ = simulate(rows, 10, "fcfs")
    assert starts_by_id(res, prep) == {1: 0, 2: 10, 3: 10, 4: 12, 5: 12, 6: 15}
    res, prep, _ = simulate(rows, 10, "conservative")
    assert starts_by_id(res, prep) == {1: 0, 2: 10, 3: 2, 4: 4, 5: 5, 6: 15}


def test_conservative_compresses_after_an_on_time_end():
    """4 units. J1 (0, runs 4 s of an estimated 5, 4u). At 3: J2 (sub 1, 1 s, 2u) is reserved at 5
    (J1's expected end), J3 (3, 1 s, 3u) at 6 (J2 leaves 2 units over [5, 6)), J4 (3, 1 s, 2u) at 5
    beside J2. J1 ends early at 4; compression in order: J2 -> 4; J3 still cannot move ([4, 5) and
    [5, 6) each hold 2 units for J2 and J4); J4 -> 4 beside J2. J2 and J4 run [4, 5) and end on time.
    At 5 that end compresses again (as pyss's ConservativeScheduler and batsched's conservative_bf,
    which reschedule after every termination) and J3, now alone, moves to 5. Compressing only after
    early ends would leave J3 reserved at 6 on an idle machine."""
    rows = [(1, 0, 4, 4, 5), (2, 1, 1, 2, 1), (3, 3, 1, 3, 1), (4, 3, 1, 2, 1)]
    res, prep, _ = simulate(rows, 4, "conservative")
    assert starts_by_id(res, prep) == {1: 0, 2: 4, 3: 5, 4: 4}


def test_easy_protects_only_the_head_conservative_protects_all():
    """10 units. J1 (0, 10 s, 6u). J2 (1, 10 s, 8u) head: shadow 10, extra 2. J3 (2, 10 s, 9u).
    EASY: J4 (3, 30 s, 2u) starts at 3 on the extra units (clause b), so J3 (9u) cannot start when J2
    ends at 20 and waits for J4's end at 33. J5 (4, 5 s, 1u) ends at 9 <= 10: starts at 4. J6 (12,
    4 s, 2u): at 20 J3 is the head with shadow 33 (J4's end), J6 ends at 24: starts at 20.
    Conservative: J2 [10,20), J3 [20,30) (1 unit left), so J4 (2u over 30 s) gets [30,60); J5
    starts at 4 in [4,9) where 4 are free; J6 fits [12,16) beside J2: starts at 12.
    FCFS: J3 at 20; J4, J5, J6 when J3 ends at 30."""
    rows = [(1, 0, 10, 6, 10), (2, 1, 10, 8, 10), (3, 2, 10, 9, 10), (4, 3, 30, 2, 30), (5, 4, 5, 1, 5),
            (6, 12, 4, 2, 4)]
    res, prep, _ = simulate(rows, 10, "easy")
    assert starts_by_id(res, prep) == {1: 0, 2: 10, 3: 33, 4: 3, 5: 4, 6: 20}
    res, prep, _ = simulate(rows, 10, "conservative")
    assert starts_by_id(res, prep) == {1: 0, 2: 10, 3: 20, 4: 30, 5: 4, 6: 12}
    res, prep, _ = simulate(rows, 10, "fcfs")
    assert starts_by_id(res, prep) == {1: 0, 2: 10, 3: 20, 4: 30, 5: 30, 6: 30}


def test_same_instant_finish_before_submit_and_ties_by_job_id():
    """4 units. J1 (0, 5 s, 4u) ends at 5; J2 (0, 5 s, 2u) waits for it. Jobs 7 (5 s, 4u), 3 (1 s,
    2u) and 5 (2 s, 2u) are submitted at 5. At 5 the finish comes first, then the submissions (in
    job-id order 3, 5, 7, after J2), then one pass: J2 and J3 start at 5; J5 when J3 ends at 6;
    J7 (4u) when J5 (ends 8) and J2 (ends 10) are both done: 10. Same for every policy."""
    rows = [(1, 0, 5, 4, 5), (2, 0, 5, 2, 5), (7, 5, 5, 4, 5), (3, 5, 1, 2, 1), (5, 5, 2, 2, 2)]
    for sched in ("fcfs", "easy", "conservative"):
        res, prep, _ = simulate(rows, 4, sched)
        assert starts_by_id(res, prep) == {1: 0, 2: 5, 3: 5, 5: 6, 7: 10}, sched


def test_kill_at_walltime_and_early_finish():
    """2 units. J1 (0, runs 3 s, asks 10 s, 2u) ends early at 3. J2 (1, runs 20 s, asks 5 s, 2u)
    starts at 3 and is killed at 8. J3 (2, 1 s, 1u) and J4 (2, runs 4 s, asks 6 s, 1u) start at 8.
    J5 (9, 2 s, 2u) finds 1 unit free (J4 until 12; expected 14) and starts at 12.
    With the kill off, J2 runs its 20 s to 23: J3, J4 at 23, J5 when both are done at 27."""
    rows = [(1, 0, 3, 2, 10), (2, 1, 20, 2, 5), (3, 2, 1, 1, 1), (4, 2, 4, 1, 6), (5, 9, 2, 2, 2)]
    for sched in ("fcfs", "easy", "conservative"):
        res, prep, _ = simulate(rows, 2, sched)
        assert starts_by_id(res, prep) == {1: 0, 2: 3, 3: 8, 4: 8, 5: 12}, sched
        assert res.end.tolist() == [3, 8, 9, 12, 14]
        assert res.killed.tolist() == [False, True, False, False, False]
    res, prep, _ = simulate(rows, 2, "easy", kill=False)
    assert starts_by_id(res, prep) == {1: 0, 2: 3, 3: 23, 4: 23, 5: 27}
    assert not res.killed.any()


def test_conservative_compression_moves_reservations_earlier():
    """10 units. J1 (0, runs 2 s, asks 10 s, 10u): expected end 10, actual 2. Reservations made at
    1: J2 (5 s, 10u) [10,15), J3 (3 s, 5u) [15,18), J4 (10 s, 5u) [15,25), J5 (2 s, 5u) [18,20).
    J1 ends at 2: compression in order moves J2 to [2,7), J3 to [7,10), J4 to [7,17) and J5 to
    [10,12) (no 5 units before 10). They start there."""
    rows = [(1, 0, 2, 10, 10), (2, 1, 5, 10, 5), (3, 1, 3, 5, 3), (4, 1, 10, 5, 10), (5, 1, 2, 5, 2)]
    res, prep, sched = simulate(rows, 10, "conservative")
    assert starts_by_id(res, prep) == {1: 0, 2: 2, 3: 7, 4: 7, 5: 10}


def test_sjf_order_with_none_and_easy_backfill():
    """4 units. J1 (0, 10 s, 4u). Then J2 (1, 100 s, 4u), J3 (2, 50 s, 2u), J4 (3, 5 s, 2u),
    J5 (4, 20 s, 1u), J6 (5, 5 s, 1u). SJF at 10 orders J4, J6 (tie at 5 s: arrival), J5, J3, J2:
    J4, J6, J5 start (4u); J3 when J4 and J6 end at 15; J2 (4u) when J3 ends at 65 (J5 ended 30).
    SJF + EASY gives the same. FCFS: J2 at 10; J3 and J4 at 110; J5 and J6 when J4 ends at 115."""
    rows = [(1, 0, 10, 4, 10), (2, 1, 100, 4, 100), (3, 2, 50, 2, 50), (4, 3, 5, 2, 5), (5, 4, 20, 1, 20),
            (6, 5, 5, 1, 5)]
    want_sjf = {1: 0, 2: 65, 3: 15, 4: 10, 5: 10, 6: 10}
    res, prep, _ = simulate(rows, 4, "sjf")
    assert starts_by_id(res, prep) == want_sjf
    res, prep, _ = simulate(rows, 4, "easy", order="sjf")
    assert starts_by_id(res, prep) == want_sjf
    want_fcfs = {1: 0, 2: 10, 3: 110, 4: 110, 5: 115, 6: 115}
    for sched in ("fcfs", "easy"):
        res, prep, _ = simulate(rows, 4, sched)
        assert starts_by_id(res, prep) == want_fcfs, sched


def test_easy_in_order_starts_then_backfill_in_same_pass():
    """8 units, all submitted at 0 (ids 1..5): J1 (10 s, 3u), J2 (10 s, 3u), J3 (10 s, 4u),
    J4 (100 s, 2u), J5 (5 s, 3u). EASY: J1, J2 start in order; J3 does not fit (2 free): shadow 10
    (8 free), extra 4; J4 ends after the shadow but 2 <= extra: backfilled at 0; J5: nothing free.
    At 10 J3 starts (2 left); J5 (3u) waits for J3's end at 20.
    FCFS: J3 and J4 at 10, J5 at 20. Conservative: J3 reserved [10,20); J4 fits beside it from 0;
    J5 has only 2 units in [10,20): 20."""
    rows = [(1, 0, 10, 3, 10), (2, 0, 10, 3, 10), (3, 0, 10, 4, 10), (4, 0, 100, 2, 100), (5, 0, 5, 3, 5)]
    res, prep, _ = simulate(rows, 8, "easy")
    assert starts_by_id(res, prep) == {1: 0, 2: 0, 3: 10, 4: 0, 5: 20}
    res, prep, _ = simulate(rows, 8, "fcfs")
    assert starts_by_id(res, prep) == {1: 0, 2: 0, 3: 10, 4: 10, 5: 20}
    res, prep, _ = simulate(rows, 8, "conservative")
    assert starts_by_id(res, prep) == {1: 0, 2: 0, 3: 10, 4: 0, 5: 20}


def test_missing_request_uses_runtime_and_never_kills():
    """A job with no requested time (-1) is planned with its runtime and never killed."""
    rows = [(1, 0, 50, 2, None), (2, 1, 5, 1, 5)]
    res, prep, _ = simulate(rows, 2, "easy")
    assert prep.estimate.tolist() == [50, 5]
    assert math.isinf(prep.kill_limit[0])
    assert starts_by_id(res, prep) == {1: 0, 2: 50}
    assert any("no requested time" in n for n in prep.notes)


@pytest.mark.parametrize("sched", ["fcfs", "easy", "conservative"])
def test_wfp3_and_unicep_orders_run(sched):
    """The dynamic orders give a complete, valid schedule on a busy queue."""
    rows = [(i, i, 10 + (i * 7) % 13, 1 + i % 4, 20) for i in range(1, 20)]
    for order in ("wfp3", "unicep"):
        res, prep, _ = simulate(rows, 4, sched, order=order)
        assert (res.start >= prep.workload.submit).all()
        assert not any(math.isnan(s) for s in res.start)
