"""Attach the analyzer's skills (computed in the env runner) to every step sample."""

from __future__ import annotations

import numpy as np
from ray.rllib.connectors.connector_v2 import ConnectorV2

from opid_rllib.connectors.common import SAMPLES, log


class AttachSkills(ConnectorV2):
    """Per sample: the trajectory's episode skill and, if the analyzer chose this step as
    critical, its step skill. A failed or missing analysis gives no skills, so the sample keeps
    the plain GRPO signal (counted in `opid/analysis_failed_trajectories`)."""

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kw):
        t = shared_data[SAMPLES]
        ep_sk, st_sk, ok = [], [], []
        for skills, idx in zip(t["skills"], t["step_index"]):
            good = bool(skills) and not skills.get("error") and bool((skills.get("episode_skill") or "").strip())
            ok.append(good)
            ep_sk.append(skills["episode_skill"] if good else None)
            steps = (skills or {}).get("step_skills") or {}
            st_sk.append((steps.get(int(idx)) or steps.get(str(int(idx)))) if good else None)
        t["episode_skill"], t["step_skill"], t["analysis_ok"] = ep_sk, st_sk, np.asarray(ok, bool)
        trajs = {}
        for tid, skills in zip(t["traj_id"], t["skills"]):
            trajs[tid] = skills
        analysed = [s for s in trajs.values() if s is not None]
        failed = [s for s in analysed if s.get("error") or not (s.get("episode_skill") or "").strip()]
        log(metrics, "analysis_trajectories", len(analysed))
        log(metrics, "analysis_failed_trajectories", len(failed))
        log(metrics, "skill_step_ratio", float(np.mean([s is not None for s in st_sk])) if st_sk else 0.0)
        return batch
