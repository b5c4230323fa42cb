"""Pipelined iterations (rollout_staleness = N > 0): the remote env runners sample the next batch while the learners
update on this one, as RLlib's APPO/IMPALA overlap sampling and learning.

The rule, per iteration (`pipelined_step`):
  1. take the oldest batch in flight (launching one first if none is), wait for its rollouts;
  2. top the queue up to N batches in flight, each launched with the learner's weights of that moment (they travel
     with the request, so a runner that finishes a batch starts the next one on the newest weights there are);
  3. wait for the taken batch's analyses, at most analysis_deadline_s after its rollouts arrived: a later one is a
     late analysis, and its trajectory trains on the GRPO signal (counted);
  4. update the learners on it. No separate weight sync: the next launch carries the weights.
A batch launched after u updates and trained after v >= u has policy lag v - u <= N (logged per iteration). N = 0 is
the serial loop (OPID._training_step), the default and the paper's. Overlap needs remote runners: the local runner
samples in the driver's own process, so the config checks refuse N > 0 with num_env_runners = 0.

Checkpoints: `OPID.get_state` first drains the pipeline (waits for every batch in flight and its analyses) and saves
those batches' episodes and policy versions, so a resumed run trains on the same next batches with the same weights
as the run that went on (tests/algo/test_pipeline.py); draining costs no sampling, as the batch is kept.
"""

from __future__ import annotations

import collections
import time
import uuid
from typing import Any

import numpy as np
import ray
from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, ENV_RUNNER_SAMPLING_TIMER, TIMERS

from opid_rllib.analyzer.base import Skills

PIPELINE_STATE = "opid_pipeline"  # the algorithm state's entry for the drained batches
ANALYSIS_REF = "analysis_ref"  # custom_data["opid"] key of a deferred analysis' ObjectRef (env_runner.py)


def sample_batch(runner, task_ids, state, version: int) -> tuple[list, Any, dict]:
    """Runs on a remote env runner: load the weights sent with the request, sample, tag the episodes with their
    policy version. Returns (episodes, the runner's metrics, {runner_wait_s}); the analyses stay in flight."""
    t0 = time.perf_counter()
    last = getattr(runner, "_pipeline_last_end", None)
    runner.set_state(state)
    s = runner.settings
    if runner._analyzer_actor is None and s["analyzer"] not in (None, "none"):
        from opid_rllib.analyzer.actor import analyzer_options, start_analyzer_actor

        runner._analyzer_actor = start_analyzer_actor(s["analyzer"], s["analyzer_num_workers"], **analyzer_options(s))
    runner.defer_analyses = True
    episodes = runner.sample_groups(task_ids) if task_ids else []
    for ep in episodes:
        ep.custom_data["opid"]["policy_version"] = int(version)
    runner._pipeline_last_end = time.perf_counter()
    return episodes, runner.get_metrics(), {"runner_wait_s": 0.0 if last is None else t0 - last}


def collect_analyses(episodes, deadline: float) -> dict[str, float]:
    """Fill each episode's skills from its analysis' ObjectRef, waiting until time.monotonic() reaches `deadline` at
    most; an analysis not in by then is late: Skills(error="late analysis ...") (no teacher term, the GRPO signal
    stays). Returns {"late_analyses", "analysis_wait_s"}."""
    t0 = time.monotonic()
    pending = [(ep, ep.custom_data["opid"].pop(ANALYSIS_REF)) for ep in episodes
               if ANALYSIS_REF in ep.custom_data["opid"]]
    refs = [ref for _, ref in pending]
    ready = set()
    if refs:
        done, _ = ray.wait(refs, num_returns=len(refs), timeout=max(0.0, deadline - t0))
        ready = set(done)
    late = 0
    for ep, ref in pending:
        if ref in ready:
            try:
                skills = ray.get(ref)
            except Exception as e:  # the analyzer actor died with the runner: an error, as a failed analysis
                skills = Skills(error=f"analysis lost: {type(e).__name__}").to_dict()
        else:
            late += 1
            skills = Skills(error="late analysis: not in by analysis_deadline_s").to_dict()
        ep.custom_data["opid"]["skills"] = skills
    return {"late_analyses": float(late), "analysis_wait_s": time.monotonic() - t0}


class RolloutPipeline:
    """The batches in flight on the remote env runners, oldest first, and the learner's policy version (updates
    done). Each entry: its request tag, the version it was launched with, the requests made, the results in so far
    (by runner id), when the last arrived, and (once collected) its analyses' counts."""

    def __init__(self, algo):
        self.algo = algo
        self.queue: collections.deque = collections.deque()
        self.version = 0
        self._launched = 0
        self._weights: tuple[int, Any] | None = None  # (version, ObjectRef of the learner's weights then)

    def weights_ref(self):
        """The learner's weights at the current version, fetched once per version (launches and the local runner)."""
        if self._weights is None or self._weights[0] != self.version:
            self._weights = (self.version, ray.put(learner_weights(self.algo.learner_group)))
        return self._weights[1]

    def updated(self) -> None:
        """After an update: one version on; the driver's local runner (exports and checkpoints read its module, as
        after RLlib's sync_weights) gets the new weights, and the next launch reuses them."""
        self.version += 1
        local = self.algo.env_runner_group.local_env_runner
        if local is not None:
            local.set_state(ray.get(self.weights_ref()))

    def launch(self, tasks: list) -> None:
        algo = self.algo
        group = algo.env_runner_group
        ids = group.healthy_env_runner_ids()
        state = self.weights_ref()
        shards = [tasks[i::len(ids)] for i in range(len(ids))]
        version = self.version
        funcs = [(lambda r, state, s=s: sample_batch(r, s, state, version)) for s in shards]
        tag = f"opid_batch_{self._launched}_{uuid.uuid4().hex[:8]}"  # unique: a restore starts the count again
        self._launched += 1
        made = group.foreach_env_runner_async(funcs, tag=tag, kwargs=[{"state": state}] * len(ids),
                                              remote_worker_ids=ids)
        self.queue.append({"tag": tag, "version": version, "requests": made, "results": {}, "arrived": None})

    def wait(self, entry: dict) -> None:
        """Block until every request of `entry` is in (or its runner failed: RLlib drops that result)."""
        group = self.algo.env_runner_group
        while len(entry["results"]) < entry["requests"]:
            for runner_id, out in group.fetch_ready_async_reqs(tags=entry["tag"], timeout_seconds=1.0):
                entry["results"][runner_id] = out
            if group.num_in_flight_async_reqs(entry["tag"]) == 0:
                break
        if entry["arrived"] is None:
            entry["arrived"] = time.monotonic()

    def resolve(self, entry: dict) -> None:
        """Wait for `entry`'s rollouts, then for its analyses up to the deadline (once)."""
        self.wait(entry)
        if "analysis" not in entry:
            deadline = entry["arrived"] + float(self.algo.config.analysis_deadline_s)
            entry["analysis"] = collect_analyses(self.episodes(entry), deadline)

    @staticmethod
    def episodes(entry: dict) -> list:
        return [ep for rid in sorted(entry["results"]) for ep in entry["results"][rid][0]]

    def drain(self) -> None:
        for entry in self.queue:
            self.resolve(entry)

    # ---- checkpoints ----
    def get_state(self) -> dict:
        self.drain()
        return {"version": self.version, "launched": self._launched,
                "batches": [{"tag": e["tag"], "version": e["version"], "analysis": e["analysis"],
                             "results": {str(rid): ([ep.get_state() for ep in eps], metrics, info)
                                         for rid, (eps, metrics, info) in e["results"].items()}}
                            for e in self.queue]}

    def set_state(self, state: dict) -> None:
        from ray.rllib.env.single_agent_episode import SingleAgentEpisode

        for entry in self.queue:  # requests still in flight finish first (they move the runners' generators)
            self.wait(entry)
        self.version, self._launched = int(state["version"]), int(state["launched"])
        self._weights = None
        self.queue.clear()
        for e in state["batches"]:
            results = {int(rid): ([SingleAgentEpisode.from_state(s) for s in eps], metrics, info)
                       for rid, (eps, metrics, info) in e["results"].items()}
            self.queue.append({"tag": e["tag"], "version": e["version"], "requests": len(results),
                               "results": results, "arrived": time.monotonic(), "analysis": e["analysis"]})


def learner_weights(learner_group) -> dict:
    """The RL module state the runners load, as EnvRunnerGroup.sync_weights takes it from the learners."""
    from ray.rllib.core import COMPONENT_LEARNER, COMPONENT_RL_MODULE
    from ray.rllib.utils.metrics import WEIGHTS_SEQ_NO

    state = learner_group.get_state(components=[f"{COMPONENT_LEARNER}/{COMPONENT_RL_MODULE}"],
                                    inference_only=True)[COMPONENT_LEARNER]
    return {k: v for k, v in state.items() if k in (COMPONENT_RL_MODULE, WEIGHTS_SEQ_NO)}


def pipelined_step(algo, beat, draw_tasks, update) -> list | None:
    """One pipelined iteration (the module docstring's rule). `draw_tasks()` gives the next batch's task ids,
    `update(episodes)` runs the learner update; returns the episodes trained on (None if the batch came back empty)."""
    pipe: RolloutPipeline = algo._pipeline
    staleness = int(algo.config.rollout_staleness)
    if not pipe.queue:
        pipe.launch(draw_tasks())
    entry = pipe.queue.popleft()
    beat.phase("waiting for the batch in flight")
    t0 = time.monotonic()
    with algo.metrics.log_time((TIMERS, ENV_RUNNER_SAMPLING_TIMER)):
        pipe.wait(entry)
    rollout_wait = time.monotonic() - t0
    while len(pipe.queue) < staleness:
        pipe.launch(draw_tasks())
    beat.phase("waiting for its analyses")
    pipe.resolve(entry)
    episodes = pipe.episodes(entry)
    infos = [info for _, _, info in entry["results"].values()]
    algo.metrics.aggregate([m for _, m, _ in entry["results"].values()], key=ENV_RUNNER_RESULTS)
    if not episodes:
        return None
    lags = [pipe.version - ep.custom_data["opid"].get("policy_version", pipe.version) for ep in episodes]
    stats = {"policy_lag_mean": float(np.mean(lags)), "policy_lag_max": float(np.max(lags)),
             "learner_wait_s": rollout_wait + entry["analysis"]["analysis_wait_s"],
             "runner_wait_s": float(np.mean([i["runner_wait_s"] for i in infos])) if infos else 0.0,
             "late_analyses": entry["analysis"]["late_analyses"], "batches_in_flight": float(len(pipe.queue))}
    for k, v in stats.items():
        algo.metrics.log_value(("opid_pipeline", k), v, window=1)
    t0 = time.monotonic()
    update(episodes)
    pipe.updated()
    algo.metrics.log_value(("opid_pipeline", "update_s"), time.monotonic() - t0, window=1)
    return episodes
