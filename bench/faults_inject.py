"""Fault injection and the advantage audit for bench/faults.py (run that, not this).

The analyzer's fake server with a seeded fault schedule, a SearchQA env that raises on a seeded
share of steps/resets, a runner that mixes well-formed actions into the untrained model's output,
and the audit connector that re-derives every sample's advantage from the raw episode.
"""

from __future__ import annotations

import json
import random

import numpy as np
from ray.rllib.connectors.connector_v2 import ConnectorV2

from envs.searchqa.env import SearchQAEnv
from opid_rllib.algorithm import OPIDConfig
from opid_rllib.env_runner import GroupedTextEnvRunner
from opid_rllib.generation.base import Generation
from tests.analyzer.fake_openai_server import FakeOpenAIServer

API_KEY = "sk-test-faults0bench0secret0key0123456789"
W = 0.5          # skill weights: large, so the teacher term is far above float noise
PENALTY = 0.1    # invalid_action_penalty (the default)
EPS = 1e-6       # outcome_advantage's eps
AUDIT: list[dict] = []   # one entry per learner-pipeline call (local learner: same process)


# ---------------------------------------------------------------- fault injection: analyzer ---
class ScheduledFakeServer(FakeOpenAIServer):
    """The repo's fake OpenAI server; records which mode served every chat request."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.served: list[str] = []

    def _next_mode(self) -> str:
        mode = super()._next_mode()
        with self._lock:
            self.served.append(mode)
        return mode


def fault_schedule(n: int, rate: float, seed: int) -> list[str]:
    """Seeded per-call modes: `rate` of calls split evenly over slow / error500 / junk."""
    rng = random.Random(f"analyzer-faults-{seed}")
    out = []
    for _ in range(n):
        u = rng.random()
        out.append("good" if u >= rate else ("slow", "error500", "junk")[int(3 * u / rate)])
    return out


# --------------------------------------------------------------------- fault injection: env ---
ENV_FAULTS = {"step_rate": 0.25, "reset_rate": 0.10, "seed": 0, "step": 0, "reset": 0}
_ENV_RNG = random.Random(0)
CRASH_ENV_ID = "opid-bench/FaultySearchQA-v0"


class FaultySearchQA(SearchQAEnv):
    """A real SearchQA env whose step / reset raise on a seeded fraction of calls (process-wide
    schedule, so rebuilt envs continue it)."""

    def _reset_task(self, task_id):
        if _ENV_RNG.random() < ENV_FAULTS["reset_rate"]:
            ENV_FAULTS["reset"] += 1
            raise ConnectionError("injected reset fault")
        return super()._reset_task(task_id)

    def _step_task(self, action):
        if _ENV_RNG.random() < ENV_FAULTS["step_rate"]:
            ENV_FAULTS["step"] += 1
            raise RuntimeError("injected step fault")
        return super()._step_task(action)


# ------------------------------------------------------ fault injection: action formats -------
INJECT = {"rate": 0.0, "count": 0, "natural_valid": 0, "natural_total": 0}
_INJECT_RNG = random.Random(0)


class MixedFormatRunner(GroupedTextEnvRunner):
    """With probability INJECT['rate'] a response is replaced by a well-formed SearchQA action.
    Token ids and log-probs are those of the replacement under the current policy, so the
    sample is exactly what sampling that text would have produced."""

    def _step_slot(self, sl, prompt, gen, was_cut, counts):
        from opid_rllib.prompts import project_action

        INJECT["natural_valid"] += int(project_action(self.env_name, gen.text)[1])  # the model's own rate
        INJECT["natural_total"] += 1
        if INJECT["rate"] > 0 and _INJECT_RNG.random() < INJECT["rate"]:
            text = "<answer>unknown</answer>" if len(sl["history"]) else "<search>capital</search>"
            m = self.module
            ids = m.tokenizer(text, add_special_tokens=False)["input_ids"][: self.settings["max_new_tokens"]]
            p_ids, _ = m.encode_prompts([prompt])
            logp = m.score(p_ids, [ids])[0]
            gen = Generation(token_ids=list(ids), logprobs=[float(x) for x in logp], text=text)
            INJECT["count"] += 1
        return super()._step_slot(sl, prompt, gen, was_cut, counts)


# --------------------------------------------------------------------------- the audit ---------
class AuditAdvantages(ConnectorV2):
    """Last piece of the learner pipeline (bench only): re-derives each sample's advantage from
    the raw episodes, independently of the pipeline's intermediate table."""

    def __init__(self, *a, w_ep=W, w_step=W, penalty=PENALTY, secret=API_KEY, **kw):
        super().__init__(*a, **kw)
        self.w_ep, self.w_step, self.penalty, self.secret = w_ep, w_step, penalty, secret

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kw):
        from ray.rllib.core import DEFAULT_MODULE_ID

        from opid_rllib.connectors.samples import log, policy_module
        from opid_rllib.prompts import insert_skills

        module = policy_module(rl_module)
        out = batch[DEFAULT_MODULE_ID]
        adv_all = out["advantages"].numpy()
        a = dict(samples=0, fallback_samples=0, fallback_exact=0, fallback_nonzero_outcome=0, skill_samples=0,
                 skill_match=0, skill_teacher_nonzero=0, misrouted=0, nonfinite=int((~np.isfinite(adv_all)).sum()),
                 outcome_adv_max_err=0.0, failed_trajs=0, ok_trajs=0, key_leaks_in_episodes=0,
                 invalid_samples=0, mixed_validity_trajs=0, penalty_gap_max_err=0.0, penalty_gap_mean=None)
        # Independent A_out: S_i = R - penalty * (1 - valid_i), GRPO stats over all steps of a group.
        rows, groups = [], {}
        for ep in episodes:
            meta = ep.custom_data["opid"]
            if self.secret in json.dumps(meta, default=str):
                a["key_leaks_in_episodes"] += 1
            valid = np.asarray(ep.get_extra_model_outputs("format_valid"), bool)
            score = float(sum(ep.get_rewards())) - self.penalty * (~valid)
            groups.setdefault(meta["group_id"], []).append(score)
            rows.append((ep, meta, valid, score))
        stats = {}
        for g, scores in groups.items():
            s = np.concatenate(scores)
            stats[g] = (0.0, 1.0) if len(s) == 1 else (s.mean(), s.std(ddof=1))
        gaps = []
        i = 0
        from opid_rllib.connectors.outcome import OUTCOME_ADV

        for (ep, meta, valid, score), pipe_adv in zip(rows, shared_data[OUTCOME_ADV]):
            mu, sd = stats[meta["group_id"]]
            a_out = (score - mu) / (sd + EPS)
            skills = meta.get("skills")
            ok = bool(skills) and not skills.get("error") and bool((skills.get("episode_skill") or "").strip())
            a["ok_trajs" if ok else "failed_trajs"] += 1
            a["invalid_samples"] += int((~valid).sum())
            if valid.any() and (~valid).any():
                a["mixed_validity_trajs"] += 1
                gap = float(np.mean(a_out[~valid]) - np.mean(a_out[valid]))
                gaps.append(gap)
                a["penalty_gap_max_err"] = max(a["penalty_gap_max_err"], abs(gap + self.penalty / (sd + EPS)))
            prompts = ep.get_extra_model_outputs("prompt")
            resp = ep.get_extra_model_outputs("response_ids")
            rlen = ep.get_extra_model_outputs("response_len")
            logp = ep.get_extra_model_outputs("logp")
            for k in range(len(ep)):
                n = int(rlen[k])
                adv = adv_all[i]
                a["samples"] += 1
                a["outcome_adv_max_err"] = max(a["outcome_adv_max_err"], abs(float(pipe_adv[k]) - a_out[k]))
                want_out = np.float32(pipe_adv[k])
                if not ok:
                    a["fallback_samples"] += 1
                    a["fallback_nonzero_outcome"] += int(abs(float(want_out)) > 1e-3)  # check is not 0 == 0
                    a["fallback_exact"] += int(np.all(adv[:n] == want_out) and np.all(adv[n:] == 0))
                else:
                    a["skill_samples"] += 1
                    steps = skills.get("step_skills") or {}
                    st = steps.get(str(k)) or steps.get(k)
                    if st and st.strip():
                        p2, w = insert_skills(str(prompts[k]), step_skill=st), self.w_step
                    else:
                        p2, w = insert_skills(str(prompts[k]), episode_skill=skills["episode_skill"]), self.w_ep
                    ids, _ = module.encode_prompts([p2])
                    teacher = module.score(ids, [[int(x) for x in resp[k][:n]]])[0]
                    want = want_out + w * (teacher - np.asarray(logp[k][:n], np.float32))
                    a["skill_match"] += int(np.allclose(adv[:n], want, atol=1e-4, rtol=0) and np.all(adv[n:] == 0))
                    a["skill_teacher_nonzero"] += int(np.abs(adv[:n] - want_out).max(initial=0) > 1e-4)
                i += 1
        a["misrouted"] = a["samples"] - a["fallback_exact"] - a["skill_match"]
        a["penalty_gap_mean"] = float(np.mean(gaps)) if gaps else None
        a["batch_rows"] = int(adv_all.shape[0])
        AUDIT.append(a)
        for k in ("fallback_exact", "skill_match", "misrouted", "nonfinite"):
            log(metrics, f"audit/{k}", a[k])
        return batch


class AuditedOPIDConfig(OPIDConfig):
    def build_learner_connector(self, input_observation_space, input_action_space, device=None):
        pipe = super().build_learner_connector(input_observation_space, input_action_space, device)
        pipe.append(AuditAdvantages(w_ep=self.episode_skill_adv_weight, w_step=self.step_skill_adv_weight,
                                    penalty=self.invalid_action_penalty))
        return pipe


