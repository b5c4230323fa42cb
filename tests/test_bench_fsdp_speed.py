"""bench/fsdp_speed.py's summary: a round lasts as long as its slower rank, medians over rounds, the ratio
sharded / all-reduce (the 2-process run itself writes bench/results/fsdp.json; tests/algo/test_sharding.py covers
the learners it times)."""

import pytest


def _rank(fsdp, none, gather, param_bytes):
    return {"times": {"fsdp": {"update_s": fsdp, "gather_s": gather}, "none": {"update_s": none,
                                                                             "gather_s": [0.0] * len(none)}},
            "param_bytes": param_bytes}


def test_summary_takes_the_slower_rank_per_round_and_the_ratio(bench_module):
    fsdp_speed = bench_module("fsdp_speed")
    ranks = [_rank([3.0, 1.0, 2.0], [1.0, 1.0, 1.0], [0.1, 0.1, 0.1], {"fsdp": 5, "none": 10}),
             _rank([1.0, 4.0, 2.5], [2.0, 0.5, 1.0], [0.3, 0.1, 0.2], {"fsdp": 6, "none": 10})]
    s = fsdp_speed.summary(ranks)
    assert s["sharded"]["update_s"] == [3.0, 4.0, 2.5] and s["sharded"]["update_s_median"] == 3.0
    assert s["all_reduce"]["update_s"] == [2.0, 1.0, 1.0] and s["all_reduce"]["update_s_median"] == 1.0
    assert s["ratio_update"] == pytest.approx(3.0)
    assert s["ratio_with_gather"] == pytest.approx((3.0 + 0.2) / 1.0)
    assert s["param_bytes_per_rank"] == {"sharded": [5, 6], "all_reduce": [10, 10]}
