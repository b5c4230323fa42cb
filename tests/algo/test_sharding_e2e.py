"""Sharded learners through Ray: `opid-train --num-learners 2 --sharding fsdp` runs two CPU iterations (Ray's
learner group sets up the gloo group), result.json names the sharding and the gather time, and its final checkpoint
exports to a folder transformers loads, with trained weights."""

import json
import os

import pytest
import torch

pytestmark = pytest.mark.ray


def test_opid_train_two_sharded_learners_two_iterations_then_export(tmp_path):
    from transformers import AutoModelForCausalLM

    from opid_rllib.cli.train import main
    from opid_rllib.export import export_checkpoint
    from opid_rllib.models import resolve_model

    rc = main(["--env", "searchqa", "--cpu-example", "--no-tune", "--stop-iters", "2", "--max-steps", "2",
               "--tasks-per-iter", "2", "--group-size", "2", "--max-new-tokens", "8", "--num-learners", "2",
               "--sharding", "fsdp", "--output", str(tmp_path / "run"), "--checkpoint-at-end", "--num-cpus", "4"])
    assert rc == 0
    rows = [json.loads(line) for line in open(tmp_path / "run" / "result.json")]
    assert [r["training_iteration"] for r in rows] == [1, 2]
    for r in rows:
        assert r["sharding"] == "fsdp"
        learner = r["learners"]["default_policy"]
        assert learner["num_samples"] > 0 and learner["weights_gather_s"] > 0
        assert torch.isfinite(torch.tensor(learner["policy_loss"]))
    out = export_checkpoint(tmp_path / "run" / "checkpoint_final", tmp_path / "hf")
    exported = AutoModelForCausalLM.from_pretrained(out).state_dict()
    base = AutoModelForCausalLM.from_pretrained(resolve_model("tiny")).state_dict()
    assert set(exported) == set(base)
    assert any(not torch.equal(exported[k], base[k]) for k in base)  # the two updates reached the checkpoint
    assert os.path.isfile(os.path.join(out, "tokenizer_config.json"))
