"""opid-export names the real problem in one line (exit 2) when it is given no checkpoint: a folder that does not
exist (a run that saved none), an empty one, or a run folder with checkpoints below it."""

from __future__ import annotations

import contextlib
import io
import os
import time

import pytest

from opid_rllib.cli.export import main
from opid_rllib.export import MODULE_SUBDIR


def _run(argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def _fake_checkpoint(path):
    (path / MODULE_SUBDIR).mkdir(parents=True)
    return path


@pytest.mark.parametrize("make, says", [
    (lambda d: d / "runs" / "opid" / "checkpoint_000000", "this folder does not exist; train with opid-train (it "
                                                          "saves a checkpoint at the end and prints where)"),
    (lambda d: d, "holds no checkpoint; point at a checkpoint_XXXXXX folder written by opid-train"),
])
def test_no_checkpoint_is_one_line_naming_the_fix(tmp_path, make, says):
    rc, stdout, stderr = _run([str(make(tmp_path)), str(tmp_path / "policy")])
    assert rc == 2 and stdout == "" and stderr.count("\n") == 1
    assert stderr.startswith("opid-export: error: ") and says in stderr and "learner_group" not in stderr
    assert not (tmp_path / "policy").exists()


def test_a_run_folder_points_at_its_latest_checkpoint(tmp_path):
    """A Tune experiment folder (experiment/trial/checkpoint_*): the message names the newest checkpoint in it."""
    older = _fake_checkpoint(tmp_path / "opid-alfworld" / "OPID_0" / "checkpoint_000000")
    newer = _fake_checkpoint(tmp_path / "opid-alfworld" / "OPID_1" / "checkpoint_000000")
    os.utime(older, (time.time() - 60, time.time() - 60))
    rc, _, stderr = _run([str(tmp_path), str(tmp_path / "policy")])
    assert rc == 2 and f"holds no checkpoint itself but 2 below it; pass one, e.g. the latest: {newer}" in stderr
