"""Does a sweep's selection panel rank its points the way the reported panel would? A diagnostic, never a selection.

The OPID protocol picks the skill weights on `valid_seen` (sweep.json, `--select-panel`) and reports on
`valid_unseen`. This plays every trial's exported selection policy (TRIAL/selection_policy, written by the sweep's
selection play) on the env's main panel with the selection play's own settings, then prints each point's mean over
its repeats on both panels, so one can see whether the point the sweep chose is also the best on the reported panel.

    python -m studies.selection_vs_unseen runs/study/sweep --torch-threads 2 --results OUT.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

from opid_rllib.sweep_panel import play_settings
from opid_rllib.sweep_select import group_by_point


def pair_points(sel: dict, main_all: dict[str, float]) -> list[dict]:
    """Rows per point (best selection score first): selection-panel and main-panel All % per repeat and their means.
    `main_all` maps a trial's path to its main-panel All %; a trial missing there (no policy) is left out."""
    rows = []
    for params, group in group_by_point([t for t in sel["trials"] if t["path"] in main_all and t.get("history")]):
        selection, main = [t["history"][0] for t in group], [main_all[t["path"]] for t in group]
        rows.append({"params": params, "selection": selection, "main": main,
                     "selection_mean": statistics.mean(selection), "main_mean": statistics.mean(main),
                     "selected": params == sel.get("best")})
    return sorted(rows, key=lambda r: -r["selection_mean"])


def play_main_panel(trial: dict, torch_threads: int) -> float:
    """The trial's selection policy on the env's main panel: All %, with the selection play's settings."""
    import torch

    from envs import env_name_of
    from opid_rllib.eval.panel import MAIN_PANELS, evaluate

    torch.set_num_threads(torch_threads)
    with open(os.path.join(trial["path"], "result.json")) as f:
        config = json.loads(f.readline())["config"]
    res = evaluate(panel=MAIN_PANELS[env_name_of(config["env"])], seed=0, progress=False,
                   max_steps=trial["selection"]["env_config"]["max_steps"],  # the selection play's step cap
                   llm_model=os.path.join(trial["path"], "selection_policy"), **play_settings(config))
    return res["table"]["success_pct"]["All"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sweep_dir", help="a sweep's --output folder (holds sweep.json from a --select-panel run)")
    p.add_argument("--torch-threads", type=int, default=2)
    p.add_argument("--results", default=None, help="write the rows here as JSON")
    args = p.parse_args(argv)
    with open(os.path.join(args.sweep_dir, "sweep.json")) as f:
        sel = json.load(f)
    if not any("selection" in t for t in sel["trials"]):
        p.error(f"{args.sweep_dir}/sweep.json: no selection play (run the sweep with --select-panel)")
    main_all = {}
    for t in sel["trials"]:
        # a trial whose selection play failed has no settings to replay and no selection score: left out
        if "env_config" in t.get("selection", {}) and os.path.isdir(os.path.join(t["path"], "selection_policy")):
            main_all[t["path"]] = play_main_panel(t, args.torch_threads)
            print(f"{t['params']}: selection {t['history']}, main panel All {main_all[t['path']]:.1f}", flush=True)
    rows = pair_points(sel, main_all)
    print(f"\n{sel['metric']} vs the main panel (All %, mean over repeats; best selection score first)")
    for r in rows:
        sel_each = ", ".join(f"{x:.1f}" for x in r["selection"])
        main_each = ", ".join(f"{x:.1f}" for x in r["main"])
        print(f"  {r['params']}: selection {r['selection_mean']:.1f} ({sel_each}), main {r['main_mean']:.1f} "
              f"({main_each}){'  <- selected' if r['selected'] else ''}")
    if args.results:
        with open(args.results, "w") as f:
            json.dump({"command": "python -m studies.selection_vs_unseen " + " ".join(sys.argv[1:] if argv is None
                                                                                      else argv), "rows": rows}, f,
                      indent=1)
        print(f"wrote {args.results}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
