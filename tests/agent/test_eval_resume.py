"""A play cut short goes on from its next chunk (opid-eval --resume, opid_rllib/eval/chunk_log.py) and ends with the
records of the uninterrupted play: real tiny model, real searchqa env, one game per chunk."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from opid_rllib.cli.eval import main
from opid_rllib.eval.chunk_log import ChunkLog

ARGS = ["--env", "searchqa", "--panel", "searchqa/smoke@v1", "--model", "tiny", "--episodes", "3", "--max-steps", "2",
        "--max-new-tokens", "8", "--torch-threads", "1", "--no-progress", "--seed", "5", "--batch-envs", "1"]


class Cut(Exception):
    """A session's end, in the middle of a play."""


def _run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def _episodes(d):
    return [json.loads(x) for x in (d / "episodes.jsonl").read_text().splitlines() if x.strip()]


def test_a_play_cut_short_resumes_at_its_next_chunk_with_the_same_games(tmp_path, monkeypatch):
    from opid_rllib.env_runner import GroupedTextEnvRunner

    rc, _, err = _run([*ARGS, "--output", str(tmp_path / "whole")])
    assert rc == 0, err
    whole = _episodes(tmp_path / "whole")
    assert not (tmp_path / "whole" / "chunks.jsonl").exists()  # the play ended: episodes.jsonl holds it

    real, calls = GroupedTextEnvRunner.sample_groups, []

    def cut_in_the_third_chunk(self, *a, **kw):
        calls.append(1)
        if len(calls) == 3:
            raise Cut()
        return real(self, *a, **kw)

    monkeypatch.setattr(GroupedTextEnvRunner, "sample_groups", cut_in_the_third_chunk)
    cut = tmp_path / "cut"
    with pytest.raises(Cut):
        _run([*ARGS, "--output", str(cut)])
    assert len((cut / "chunks.jsonl").read_text().splitlines()) == 2 and not (cut / "results.json").exists()
    played_s = [json.loads(line)["seconds"] for line in (cut / "chunks.jsonl").read_text().splitlines()]
    assert all(t > 0 for t in played_s)

    monkeypatch.setattr(GroupedTextEnvRunner, "sample_groups", real)
    rc, out, err = _run([*ARGS, "--output", str(cut), "--resume"])
    assert rc == 0, err
    assert "resumed: 2 games read back" in out
    assert _episodes(cut) == whole  # the games read back and the one played are the uninterrupted play's
    res = json.loads((cut / "results.json").read_text())
    assert res["timing"]["resumed_episodes"] == {"student": 2}
    # the time of the chunks read back is kept, so a play over several sittings can be timed whole
    assert res["timing"]["resumed_play_s"] == {"student": pytest.approx(sum(played_s), abs=2e-3)}
    assert not (cut / "chunks.jsonl").exists()

    # without --resume a play starts over; --resume needs the play's folder
    monkeypatch.setattr(GroupedTextEnvRunner, "sample_groups", cut_in_the_third_chunk)
    calls.clear()
    with pytest.raises(Cut):
        _run([*ARGS, "--output", str(cut)])
    monkeypatch.setattr(GroupedTextEnvRunner, "sample_groups", real)
    rc, out, _ = _run([*ARGS, "--output", str(cut)])
    assert rc == 0 and "resumed" not in out and _episodes(cut) == whole
    rc, _, err = _run([*ARGS, "--resume"])
    assert rc == 2 and "--resume" in err and "--output" in err


def test_a_chunk_log_reads_back_only_its_own_plays_whole_chunks(tmp_path):
    path = tmp_path / "chunks.jsonl"
    key = {"weights": "sha256:a", "seed": 0, "role": "student"}
    log = ChunkLog(path, key)
    rec = [{"task_id": "t0", "length": 3, "won": True}]
    assert log.add(0, ["t0"], rec) == rec
    ChunkLog(path, dict(key, seed=1)).add(1, ["t1"], [{"task_id": "t1", "length": 2, "won": False}])
    with open(path, "a") as f:
        f.write('{"key": "' + log.key + '", "chunk": 2, "task_ids": ["t2"], "rec')  # a kill while writing
    again = ChunkLog(path, key)
    assert again.get(0, ["t0"]) == rec and (again.resumed_episodes, again.resumed_steps) == (1, 3)
    assert again.get(1, ["t1"]) is None  # another play's chunk (seed 1)
    assert again.get(2, ["t2"]) is None  # the cut line
    assert again.get(0, ["t9"]) is None  # chunk 0 of another task list
    assert ChunkLog(path, dict(key, role="teacher")).get(0, ["t0"]) is None
