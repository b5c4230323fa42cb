"""The analyzer as a Ray actor, for pipelined iterations (rollout_staleness > 0, opid_rllib/pipeline.py).

Why an actor: in the serial loop an env runner waits for its analyses before it returns its batch (AnalyzerPool's
threads inside the runner). Pipelined, the runner returns the rollouts at once and starts the next batch, so the
analyses must outlive that call and be collected by someone else: each finished trajectory becomes one call to this
actor, and its ObjectRef travels with the episode to the driver, which waits for it up to analysis_deadline_s
(pipeline.collect_analyses). The actor runs `analyzer_num_workers` calls at a time (a threaded actor over the same
AnalyzerPool), takes no CPU from Ray's accounting (it waits on HTTP or does string work), and reads its API key from
its own environment, as the runner's pool does.
"""

from __future__ import annotations

from typing import Any

from opid_rllib.analyzer.base import TrajectoryRecord


class AnalyzerActor:
    def __init__(self, name: str, num_workers: int, **options: Any):
        from opid_rllib.analyzer import AnalyzerPool, make_analyzer

        self._pool = AnalyzerPool(make_analyzer(name, **options), num_workers=num_workers)

    def analyze(self, record: TrajectoryRecord) -> dict:
        """Skills.to_dict() of one trajectory; never raises (the pool turns errors into Skills(error=...))."""
        return self._pool.submit(record).result().to_dict()

    def stats(self) -> dict:
        return self._pool.stats()


def analyzer_options(settings: dict) -> dict:
    """The analyzer's constructor options from an env runner's settings (OPIDConfig.opid_runner_settings)."""
    return dict(max_step_skills=settings["max_step_skills_per_traj"], **dict(settings["analyzer_config"]),
                **dict(settings["hindsight_options"] or {}))


def start_analyzer_actor(name: str, num_workers: int, **options: Any):
    """A handle to a new AnalyzerActor, owned by the calling process (an env runner): it goes when that process does."""
    import ray

    cls = ray.remote(num_cpus=0, max_concurrency=int(num_workers) + 1)(AnalyzerActor)  # +1: stats() never queues
    return cls.remote(name, int(num_workers), **options)
