"""bench/dtype_speed.py: float32 against bfloat16 for the SFT and the panel play, side by side."""

from __future__ import annotations

import json

import pytest


@pytest.mark.slow  # two SFT epochs and four panel games: ~20 s
def test_dtype_speed_times_both_dtypes_side_by_side(tmp_path, one_thread, bench_module):
    """bench/dtype_speed.py: the same SFT epoch and panel games at float32 and bfloat16, interleaved; the JSON
    holds a row per part and dtype, ratios to float32, each run's figures (bf16 SFT learns too)."""
    dtype_speed = bench_module("dtype_speed")
    out = tmp_path / "speed.json"
    assert dtype_speed.main(["--model", "tiny", "--parts", "sft,play", "--rounds", "1", "--sft-tasks", "1",
                             "--play-episodes", "2", "--play-max-steps", "3", "--max-prompt-len", "256",
                             "--json", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["torch_cpu_capability"] and isinstance(record["cpu_flags"], list)  # what hardware it came from
    rows = record["rows"]
    assert [(r["part"], r["dtype"]) for r in rows] == [("sft", "float32"), ("sft", "bfloat16"),
                                                      ("play", "float32"), ("play", "bfloat16")]
    assert rows[0]["ratio_to_first"] == 1.0 and all(r["median_s"] > 0 for r in rows)
    assert all(r["runs"][0]["final_eval_loss"] > 0 for r in rows[:2])
    # the untrained model never wins: each of the 2 games runs to the --play-max-steps cap
    assert all(r["runs"][0]["won"] == 0 and r["runs"][0]["steps"] == 2 * 3 for r in rows[2:])
    with pytest.raises(SystemExit):
        dtype_speed.main(["--model", "tiny", "--dtypes", "float32,float64"])
