"""The quickstart's last step builds rung 0's warm start on a first run: it says so and prints progress lines
(it was a 25 s silence, past the README's promise of a line every 10-15 s)."""

from __future__ import annotations

import re

from tuned_examples import signpost_rung0 as rung0


def test_a_first_warm_start_build_says_so_and_prints_progress(tmp_path, capfd, monkeypatch, one_thread):
    assert 0 < rung0.PROGRESS_EVERY_S <= 10
    monkeypatch.setattr(rung0, "WARM_START", dict(rung0.WARM_START, tasks=8, epochs=1))  # seconds, not 30
    said = []
    model = rung0.warm_start(cache_dir=tmp_path, log=said.append)
    assert (model / "config.json").exists() and model.parent == tmp_path / "models"
    assert len(said) == 1 and said[0].startswith("[rung0] building the format-only warm start once (8 games")
    # the progress lines: at most every PROGRESS_EVERY_S, and the last step's
    assert re.search(r"^\[opid-sft\] step (\d+)/\1 \(100%\)", capfd.readouterr().err, re.M)
    said.clear()
    assert rung0.warm_start(cache_dir=tmp_path, log=said.append) == model and said == []  # cached: nothing to say
