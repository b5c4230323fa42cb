"""studies/learning.py's job checkpoints (studies/job_checkpoint.py): a study job cut short resumes at its next
iteration and ends where the uninterrupted job ends. Real RLlib, the real tiny model, the real ALFWorld engine; only
the panel play is stood in (it is what the job does after training, and is tested elsewhere)."""

import argparse
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from studies import job_checkpoint, study_job
from tests.algo.helpers import scalar_steps


class Cut(Exception):
    """A session's end, in the middle of an iteration."""


def _args(out):
    return argparse.Namespace(max_steps=2, history_length=2, tasks_per_iter=1, group_size=2, max_prompt_len=1024,
                              max_new_tokens=8, lr=1e-4, minibatch_size=None, dtype="float32",
                              micro_batch_size=None, env_config={"expert": "sweep"}, iters=2, out=str(out))


def _weights(policy):
    return load_file(str(policy / "model.safetensors"))


@pytest.mark.ray
def test_a_study_job_cut_short_resumes_at_its_next_iteration_and_ends_the_same(tmp_path,
                                                                                 monkeypatch, capsys):
    from opid_rllib.algorithm import OPID

    plays = []

    def play(policy, seed, args, chunks):
        plays.append((policy, chunks))
        return {"x": 1, "resumed_play_s": 100.0}  # as a play that read back chunks played in an earlier sitting

    monkeypatch.setattr(study_job, "evaluate_policy", play)
    variant = "opid:w_step=0.3+teacher_sample_adv_weight=1"
    monkeypatch.chdir(tmp_path)  # --out relative to the working directory, as the study scripts give it
    whole = study_job.train_and_eval("tiny", variant, 0, _args("whole"))

    real_train, calls = OPID.train, []

    def cut_in_the_second(self):
        calls.append(1)
        if len(calls) == 2:
            raise Cut()
        return real_train(self)

    # The cut comes after iteration 2 was logged, before its checkpoint: the resumed job plays it again.
    real_save = job_checkpoint.save

    def cut_before_the_second_save(algo, run_dir, progress):
        if len(progress["iters"]) == 2:
            raise Cut()
        real_save(algo, run_dir, progress)

    monkeypatch.setattr(job_checkpoint, "save", cut_before_the_second_save)
    args = _args("cut")
    run_dir = Path(study_job.run_dir_of(args, variant, 0))
    with pytest.raises(Cut):
        study_job.train_and_eval("tiny", variant, 0, args)
    monkeypatch.setattr(job_checkpoint, "save", real_save)
    ckpt = run_dir / "checkpoint"
    assert len(json.loads((ckpt / "progress.json").read_text())["iters"]) == 1 and not (run_dir / "policy").exists()
    assert len((run_dir / "result.json").read_text().splitlines()) == 2

    # The lines are rebuilt from the checkpoint's copy: the run folder's may be behind it (here the test empties
    # it), and they are on disk before the first resumed iteration starts. Unflushed, they sat in the write
    # buffer until that iteration's end (seen on the float32 study), so a cut before then would lose them.
    (run_dir / "result.json").write_text("")
    on_disk = []

    def look_then_train(self):
        on_disk.append(len((run_dir / "result.json").read_text().splitlines()))
        return real_train(self)

    monkeypatch.setattr(OPID, "train", look_then_train)
    resumed = study_job.train_and_eval("tiny", variant, 0, args)
    monkeypatch.setattr(OPID, "train", real_train)
    assert on_disk == [1]
    assert "resuming after iteration 1" in capsys.readouterr().out
    assert len(resumed["iters"]) == 2 and len((run_dir / "result.json").read_text().splitlines()) == 2
    # TensorBoard shows the replayed iteration once (the cut run's point for it is purged)
    assert scalar_steps(run_dir, "training_iteration") == [1, 2]
    strip = [{k: v for k, v in it.items() if k != "seconds"} for it in whole["iters"]]
    assert [{k: v for k, v in it.items() if k != "seconds"} for it in resumed["iters"]] == strip
    # the second iteration drew what the uninterrupted job drew (random generators restored), so the weights agree
    a, b = _weights(Path("whole", "runs", run_dir.name, "policy")), _weights(run_dir / "policy")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert not ckpt.exists() and (run_dir / "trained.json").exists()  # the checkpoints go once the policy is out

    # a play cut short does not train again: the job plays the policy it exported
    monkeypatch.setattr(OPID, "train", cut_in_the_second)
    calls.clear()
    plays.clear()
    again = study_job.train_and_eval("tiny", variant, 0, args)
    # ... and keeps its finished chunks of games in the run folder, where a play cut short goes on from them
    assert not calls and plays == [(str(run_dir / "policy"), str(run_dir / "play_chunks.jsonl"))]
    assert again["iters"] == resumed["iters"] and again["train_s"] == resumed["train_s"]
    assert again["table"] == {"x": 1} and again["eval_s"] >= 100.0  # the earlier sittings' play time counts


def test_a_checkpoint_from_before_the_algorithm_carried_the_generators_still_restores_them(tmp_path):
    """Study jobs checkpointed by older versions keep the process's generators in rng.pt beside the algorithm."""
    import random

    import numpy as np
    torch.manual_seed(5)
    np.random.seed(5)
    random.seed(5)
    torch.save({"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()},
               tmp_path / job_checkpoint.RNG)
    (tmp_path / job_checkpoint.RECORD).write_text('{"iters": [1]}')
    expected = (torch.rand(3).tolist(), np.random.rand(3).tolist(), random.random())

    class Restored:  # stands in for the algorithm's own restore, which the Ray test above runs for real
        def restore_from_path(self, path):
            self.path = path

    algo = Restored()
    assert job_checkpoint.restore(algo, str(tmp_path)) == {"iters": [1]} and algo.path == str(tmp_path)
    assert (torch.rand(3).tolist(), np.random.rand(3).tolist(), random.random()) == expected


def test_a_study_play_runs_in_a_fresh_process_and_plays_the_games_this_one_would():
    """studies/learning.py plays a panel in a spawned child (a SmolLM2 play in the process that had trained ran at
    about half speed): the child takes the study's torch threads, not this process's, and plays the same games."""
    import argparse

    from opid_rllib.eval.panel import evaluate

    args = argparse.Namespace(batch_envs=2, eval_temperature=0.4, eval_max_steps=3, history_length=2,
                              max_new_tokens=8, max_prompt_len=512, dtype="float32", env_config={"expert": "sweep"},
                              torch_threads=1)
    play = dict(panel="alfworld/smoke@v1", episodes=2, seed=0)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        child = study_job._play_panel("tiny", args, **play)
        assert torch.get_num_threads() == 2  # set to 1 there, not here
        torch.set_num_threads(1)
        here = evaluate(progress=False, batch_envs=2, temperature=0.4, llm_model="tiny", max_steps=3,
                        history_length=2, max_new_tokens=8, max_prompt_len=512, dtype="float32",
                        env_kwargs={"expert": "sweep"}, **play)
    finally:
        torch.set_num_threads(before)

    def games(ev):
        return [(r["task_id"], r["won"], r["length"], r["responses"]) for r in ev["episodes"]]

    assert len(games(child)) == 2 and all(g[2] > 0 for g in games(child))
    assert games(child) == games(here)
