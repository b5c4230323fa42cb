"""What an OPID checkpoint carries beyond RLlib's own (a mixin of OPID): the task stream, every process's random
generators and the env runners' skill caches, and with pipelined iterations the batches in flight, so that a resume
goes on where it stopped."""

from __future__ import annotations

from opid_rllib import process_rng
from opid_rllib.pipeline import PIPELINE_STATE

# The algorithm state's entry for what RLlib's checkpoint leaves out: every process's random generators and the
# env runners' skill caches (ResumeStateMixin._resume_state).
RESUME_STATE = "opid_resume"


class ResumeStateMixin:
    def save_to_path(self, *args, **kwargs):
        """Sharded learners first gather their whole weights and optimizer state onto rank 0 (a collective every
        learner joins), which RLlib then asks for, as it asks a replicated learner."""
        if self.config.sharding == "fsdp" and self.learner_group.is_remote:
            self.learner_group.foreach_learner(lambda learner: learner.stage_checkpoint())
        return super().save_to_path(*args, **kwargs)

    def get_state(self, components=None, *, not_components=None, **kwargs):
        resume = self._check_component(RESUME_STATE, components, not_components)
        # Pipelined: drained first, so the runners' generators are saved after the batches in flight (pipeline.py).
        batches = self._pipeline.get_state() if resume and getattr(self, "_pipeline", None) is not None else None
        state = super().get_state(components, not_components=not_components, **kwargs)
        state["opid_task_rng"] = self._task_rng.bit_generator.state
        if resume:
            state[RESUME_STATE] = self._resume_state()
        if batches is not None:
            state[PIPELINE_STATE] = batches
        return state

    def set_state(self, state) -> None:
        super().set_state(state)
        if "opid_task_rng" in state:
            self._task_rng.bit_generator.state = state["opid_task_rng"]
        if RESUME_STATE in state:  # absent from checkpoints of older versions: their processes keep their seeds
            self._set_resume_state(state[RESUME_STATE])
        if PIPELINE_STATE in state and getattr(self, "_pipeline", None) is not None:
            self._pipeline.set_state(state[PIPELINE_STATE])

    def _resume_state(self) -> dict:
        """This process's generators (the local env runner and a local learner draw from them), each env runner's
        (`GroupedTextEnvRunner.resume_state`, keyed by worker index) and each remote learner's (keyed by rank).
        String keys: msgpack checkpoints refuse others."""
        out = {"driver": process_rng.capture(), "env_runners": {}, "learners": {}}
        group = self.env_runner_group
        if group is not None:
            for idx, runner_state in group.foreach_env_runner(lambda r: (r.worker_index, r.resume_state())):
                out["env_runners"][str(idx)] = runner_state
        if self.learner_group.is_remote:
            for res in self.learner_group.foreach_learner(lambda _: (_learner_rank(), process_rng.capture())):
                rank, rng = res.get()
                out["learners"][str(rank)] = rng
        return out

    def _set_resume_state(self, saved: dict) -> None:
        """A process whose key is missing (a checkpoint from a run with fewer runners or learners) keeps its seed."""
        process_rng.restore(saved.get("driver"))
        runners, learners = saved.get("env_runners", {}), saved.get("learners", {})
        if self.env_runner_group is not None:
            self.env_runner_group.foreach_env_runner(lambda r: r.set_resume_state(runners.get(str(r.worker_index))))
        if self.learner_group.is_remote:
            self.learner_group.foreach_learner(lambda _: process_rng.restore(learners.get(str(_learner_rank()))))


def _learner_rank() -> int:
    """This learner's rank in its torch.distributed group (0 for a single learner, which has none)."""
    import torch.distributed as dist

    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0

