"""OPIDTorchLearner: token-level clipped PPO with KL to a frozen reference and an entropy bonus.

The advantages (outcome + skill terms) arrive ready in the batch from the learner connector
pipeline; this class only optimises. Long prompts fit because every minibatch is processed in
micro-batches with gradient accumulation. With several learners, gradients are averaged with
an explicit all-reduce after accumulation (not DDP's per-backward hooks), so learners holding
different numbers of micro-batches never deadlock; gradients travel in flattened buckets (a
handful of collectives per update, not one per tensor).

Mixed precision: the module holds fp32 master weights (and AdamW fp32 state) and computes under
autocast; the frozen KL reference is a bf16/fp16 copy on the learner's device.

Sharded (`sharding="fsdp"`, sharding.py): the policy is split across the learners with FSDP2 instead of replicated;
gradients are reduce-scattered during backward, so every rank runs the same number of forward/backward passes (a
rank short of rows runs zero-weight ones); the re-score runs on weights gathered once per update; the whole
weights are gathered once after each update for the env runners and checkpoints (rank 0 keeps them).

Token mean across learners: each rank divides its loss sum by the batch's token count over all ranks (times the
number of ranks, which the gradient mean divides out), so N learners take the 1-learner step whatever their
token counts.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.learner.torch.torch_learner import TorchLearner

from opid_rllib import progress, sharding
from opid_rllib.connectors.samples import policy_module
from opid_rllib.grad_sync import all_reduce_mean
from opid_rllib.losses import ppo_token_loss
from opid_rllib.rl_module import DTYPES
from opid_rllib.settings import default
from opid_rllib.token_logprobs import length_order, response_logprobs


def minibatch_count(n: int, minibatch_size: int | None) -> int:
    """Optimizer steps for n step-samples: ceil(n / minibatch_size), at least 1 (None: 1, the whole batch)."""
    if not minibatch_size:
        return 1
    return max(1, -(-int(n) // int(minibatch_size)))


def minibatch_rows(n: int, k: int, anchor: torch.Tensor | None = None, device=None) -> list[torch.Tensor]:
    """Row indices of the k minibatches, split over the student's rows; each teacher-anchor row (x + skill, y_T),
    which follows its teacher row, goes with the rows before it, so no minibatch holds anchor rows alone."""
    rows = torch.arange(n, device=device)
    if anchor is None or not bool(anchor.any()):
        return list(torch.tensor_split(rows, k))
    chunks = torch.tensor_split(torch.nonzero(anchor == 0).squeeze(1).to(rows.device), k)
    starts = [int(c[0]) for c in chunks if len(c)]
    if not starts:  # anchor rows only
        return [rows] + [rows[:0]] * (k - 1)
    edges = iter(zip([0] + starts[1:], starts[1:] + [n]))  # a non-empty chunk runs up to the next one's start
    return [rows[slice(*next(edges))] if len(c) else rows[:0] for c in chunks]


def student_mask(batch) -> torch.Tensor:
    """The response tokens of every row but the teacher anchor's (x + skill, y_T; experimental/teacher_samples.py),
    which only its own term trains."""
    mask = batch["response_mask"]
    anchor = batch.get("anchor_rows")
    return mask if anchor is None else mask * (1.0 - anchor[:, None].to(mask.dtype))


def student_tokens(batch) -> torch.Tensor:
    """The token-mean's denominator: the student's tokens (`student_mask`), so turning the teacher anchor on leaves
    the step size of every other term as it was."""
    return student_mask(batch).sum().clamp(min=1.0)


def loss_sum(cfg, loss_terms, batch, fwd_out, ref_logp):
    """(sum over tokens of the loss, diagnostics): the paper's loss (losses.py) on the student's tokens, plus each
    research plug-in's terms (`loss_terms`, experimental.plugins(cfg); none when they are off)."""
    mask = student_mask(batch)
    loss, stats = ppo_token_loss(
        fwd_out["logp"], batch["old_logp"], batch["advantages"], mask, entropy=fwd_out.get("entropy"),
        ref_logp=ref_logp, clip_ratio_low=cfg.clip_ratio_low, clip_ratio_high=cfg.clip_ratio_high,
        dual_clip_c=cfg.dual_clip_c, kl_coeff=cfg.kl_coeff, entropy_coeff=cfg.entropy_coeff,
        is_weight=batch.get("is_weight"))
    for terms in loss_terms:
        loss = loss + terms(cfg, fwd_out["logp"], mask, batch, ref_logp, stats)
    return loss, {k: v.detach() for k, v in stats.items()}


def world_size() -> int:
    """Learners in the torch.distributed group (1 without one)."""
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def sum_over_ranks(x: torch.Tensor) -> torch.Tensor:
    """x summed over the learners (x itself for one learner); every rank must call it."""
    if world_size() > 1:
        x = x.clone()
        dist.all_reduce(x)
    return x


def max_over_ranks(x: torch.Tensor) -> torch.Tensor:
    """x's maximum over the learners (x itself for one learner); every rank must call it."""
    if world_size() > 1:
        x = x.clone()
        dist.all_reduce(x, op=dist.ReduceOp.MAX)
    return x


class OPIDTorchLearner(TorchLearner):
    @property
    def sharded(self) -> bool:
        """FSDP2 over the learners' process group (`sharding="fsdp"`, which the config checks refuse without one)."""
        return getattr(self.config, "sharding", "none") == "fsdp" and world_size() > 1

    def _make_module(self):
        module = super()._make_module()
        if self.sharded:  # before the optimizers are built, so AdamW's state lives on the shards
            policy = policy_module(module)
            sharding.shard_model(policy.model, policy.compute_dtype)
        return module

    def _make_modules_ddp_if_necessary(self) -> None:
        if not self.sharded:  # DDP's wrapper only broadcasts here (the update all-reduces itself); never over shards
            super()._make_modules_ddp_if_necessary()

    def build(self) -> None:
        super().build()
        from opid_rllib.experimental import plugins

        self._ref_model = None
        mc = self.config.model_config  # resolved once: reading it resolves the model path
        self._temperature = float(mc.get("temperature", default("temperature")))
        on = plugins(self.config)
        self._loss_terms = [p.loss_terms for p in on if p.loss_terms is not None]  # research terms, when on
        # pi_ref is scored for the KL penalty, and for a plug-in that reads it (the teacher anchor).
        self._needs_ref = self.config.kl_coeff > 0 or any(p.needs_ref(self.config) for p in on)
        # LoRA: the reference is the same model with its adapters disabled (no second copy).
        self._ref_is_base = bool(mc.get("lora"))
        if self._needs_ref and not self._ref_is_base:
            from opid_rllib.models.resolve import load_model, node_model_path

            # Sharded runs too: a whole compute-dtype copy per learner (memory_plan counts it), so the reference's
            # forwards need no collective.
            self._ref_model = load_model(node_model_path(mc), DTYPES[mc.get("dtype", default("dtype"))])
            self._ref_model.to(self._device).eval().requires_grad_(False)
        self._staged_optimizer_state = None
        if self.sharded:
            self._gather_full_weights()  # the env runners' first weights come from here

    def configure_optimizers_for_module(self, module_id, config=None) -> None:
        module = self._module[module_id]
        params = [p for p in self.get_parameters(module) if p.requires_grad]  # LoRA: adapters only
        optimizer = torch.optim.AdamW(params, weight_decay=self.config.weight_decay)
        self.register_optimizer(module_id=module_id, optimizer=optimizer, params=params,
                                lr_or_lr_schedule=self.config.lr)

    def compute_loss_for_module(self, *, module_id, config, batch, fwd_out):
        """RLlib's abstract hook, never reached: `_uncompiled_update` micro-batches and accumulates the loss itself."""
        raise NotImplementedError("OPIDTorchLearner computes its loss in _uncompiled_update (micro-batched)")

    def _loss_sum(self, batch, fwd_out):
        return loss_sum(self.config, self._loss_terms, batch, fwd_out, self._ref_logp(batch))

    def _ref_logp(self, batch):
        """log pi_ref on the responses, or None where no term uses it: the KL penalty reads every row, the teacher
        anchor only its own, so at kl_coeff = 0 a micro-batch without anchor rows skips the forward."""
        anchor = batch.get("anchor_rows")
        if not (self.config.kl_coeff > 0 or (self._needs_ref and anchor is not None and bool(anchor.any()))):
            return None
        args = (batch["prompt_ids"], batch["prompt_len"], batch["response_ids"], batch["response_len"])
        if self._ref_is_base:  # LoRA: the base is the same model with its adapters disabled
            module = policy_module(self.module)
            with torch.no_grad(), module.model.disable_adapter(), module.autocast():
                return response_logprobs(module.model, *args, temperature=self._temperature)[0]
        if self._ref_model is None:
            return None
        with torch.no_grad():  # the ref is already in the compute dtype: no autocast needed
            return response_logprobs(self._ref_model, *args, temperature=self._temperature)[0]

    def _uncompiled_update(self, batch, **kwargs):
        """One PPO pass over the batch: an optimizer step per minibatch (`minibatch_size` step-samples,
        the reference's ppo_mini_batch_size; None = one step on the whole batch), each accumulated over
        length-sorted micro-batches. Old log-probs and advantages stay those of the rollout, so later
        minibatches are clipped against them as in PPO."""
        mid = DEFAULT_MODULE_ID
        data = {k: torch.as_tensor(v).to(self._device) for k, v in batch[mid].items()}
        module = policy_module(self.module)
        n = int(data["response_ids"].shape[0])
        # The teacher anchor's rows do not count toward minibatch_size: the anchor must not add optimizer steps.
        anchor = data.get("anchor_rows")
        k = minibatch_count(n if anchor is None else int((anchor == 0).sum()), self.config.minibatch_size)
        distributed = world_size() > 1
        if distributed:  # every rank must take the same number of optimizer steps (all-reduce per step)
            t = torch.tensor([k], device=self._device)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            k = int(t.item())
        totals: dict[str, torch.Tensor] = {}
        loss_total = torch.zeros((), device=self._device)
        self._rows_total, self._rows_done = n, 0  # what progress.post shows the driver's heartbeat
        progress.post("policy update: rows", 0, n)
        for rows in minibatch_rows(n, k, anchor, self._device):  # sequential, as verl
            loss_sum, stats = self._minibatch_step(module, {key: v[rows] for key, v in data.items()}, distributed)
            loss_total = loss_total + loss_sum
            for key, v in stats.items():
                totals[key] = totals.get(key, 0.0) + v
        n_tok = student_tokens(data)
        # Means over their own tokens: the anchor's KL per anchor token, the KL to pi_ref per token the policy sampled.
        for key, count in (("teacher_anchor_kl", "teacher_anchor_tokens"), ("kl_ref", "kl_ref_tokens")):
            tok = totals.pop(count, None)
            if tok is not None:
                self.metrics.log_value((mid, key), float(totals.pop(key) / tok.clamp(min=1.0)), window=1)
        for key, v in totals.items():  # token means over the whole batch, whatever the minibatching
            self.metrics.log_value((mid, key), float(v / n_tok), window=1)
        self.metrics.log_value((mid, "num_samples"), n, window=1)
        self.metrics.log_value((mid, "num_response_tokens"), float(n_tok), window=1)
        self.metrics.log_value((mid, "num_optimizer_steps"), k, window=1)
        loss = sum_over_ranks(loss_total) / sum_over_ranks(student_mask(data).sum()).clamp(min=1.0)  # every learner's
        return {}, {mid: loss}, {}

    def _minibatch_step(self, module, data: dict, distributed: bool):
        """Accumulate the token-mean loss of one minibatch over micro-batches, then one optimizer step.
        An empty minibatch (a rank with fewer rows) contributes zero gradients to the all-reduce."""
        n = int(data["response_ids"].shape[0])
        mb = max(1, int(self.config.micro_batch_size))
        world = world_size()
        # The token mean over every learner's rows of this minibatch; the gradient mean over ranks divides `world` out.
        n_tok = sum_over_ranks(student_mask(data).sum()).clamp(min=1.0)
        passes = -(-n // mb)
        if self.sharded:  # each pass gathers and reduce-scatters: every rank runs as many
            passes = int(max_over_ranks(torch.tensor(passes, device=self._device)))
        for optim in self._optimizer_parameters:
            optim.zero_grad(set_to_none=True)
        totals: dict[str, torch.Tensor] = {}
        loss_total = torch.zeros((), device=self._device)
        # Length-sorted micro-batches; the token-mean loss is a sum over rows / n_tok, so the order
        # does not change it.
        order = length_order(data["prompt_len"], data["response_len"])
        for s in range(0, passes * mb, mb):
            if s >= n:  # sharded, and this rank is out of rows
                idle_pass(module.model, self._device)
                continue
            sub = {k: v[order[s:s + mb]] for k, v in data.items()}
            fwd = module._forward_train(sub)
            loss_sum, stats = self._loss_sum(sub, fwd)
            (loss_sum * world / n_tok).backward()  # accumulate: token-mean over the whole minibatch
            loss_total = loss_total + loss_sum.detach()
            for k, v in stats.items():
                totals[k] = totals.get(k, 0.0) + v
            self._rows_done = getattr(self, "_rows_done", 0) + len(sub["response_ids"])
            progress.post("policy update: rows", self._rows_done, max(self._rows_done, getattr(self, "_rows_total", n)))
        for p in self._params.values():  # every rank must all-reduce the same tensors
            if p.grad is None and p.requires_grad:
                p.grad = torch.zeros_like(p)
        grads = {pid: p.grad for pid, p in self._params.items() if p.grad is not None}
        if distributed and not self.sharded:  # sharded: FSDP reduce-scattered them during backward
            all_reduce_mean(list(grads.values()))
        self.apply_gradients(self.postprocess_gradients(grads))
        return loss_total, totals

    # ---- sharded learners (sharding.py) ---------------------------------------------------
    def _get_clip_function(self):
        """The global norm over the whole model, every rank's shards included (RLlib's would see this rank's shard
        only), as a sum of squares: RLlib's torch.norm of fp32 tensors drifted 5e-5 relative on CPU here, which
        would keep the sharded and replicated steps apart."""
        return sharding.clip_by_global_norm

    def _get_global_norm_function(self):
        return sharding.global_norm

    def _make_batch_if_necessary(self, training_data):
        """The learner connectors (the OPID re-score, pi_old) score each rank's own rows on weights gathered once."""
        with sharding.gathered(policy_module(self.module).model):
            return super()._make_batch_if_necessary(training_data)

    def after_gradient_based_update(self, *, timesteps) -> None:
        super().after_gradient_based_update(timesteps=timesteps)
        if self.sharded:  # once per update: the weights the env runners get next
            self.metrics.log_value((DEFAULT_MODULE_ID, "weights_gather_s"), self._gather_full_weights(), window=1)

    def _gather_full_weights(self) -> float:
        """Collective: the whole fp32 weights, kept on rank 0, which RLlib asks for weight syncs and checkpoints."""
        policy = policy_module(self.module)
        state, seconds = sharding.full_state(policy.model)
        policy.full_state = state if dist.get_rank() == 0 else None
        return seconds

    def stage_checkpoint(self) -> None:
        """Collective, before a checkpoint (OPID.save_to_path calls it on every learner): the whole weights and
        optimizer state, kept on rank 0 for the next get_state. Gathered, not written per rank: with no shared disk,
        per-rank files would land on different nodes."""
        self._gather_full_weights()  # the weights of this moment, whatever the last update left
        staged = {name: sharding.full_optimizer_state(optim) for name, optim in self._named_optimizers.items()}
        self._staged_optimizer_state = staged if dist.get_rank() == 0 else None

    def _get_optimizer_state(self):
        if not self.sharded:
            return super()._get_optimizer_state()
        if self._staged_optimizer_state is None:
            raise RuntimeError("sharded learner: the optimizer state is gathered by stage_checkpoint() on every "
                               "learner first (OPID.save_to_path does it); rank 0 then returns it")
        staged, self._staged_optimizer_state = self._staged_optimizer_state, None
        return {name: {"module_id": self._optimizer_name_to_module[name], "state": state}
                for name, state in staged.items()}

    def _set_optimizer_state(self, state) -> None:
        super()._set_optimizer_state(state)
        if self.sharded:  # each rank keeps its slice of the whole state it was given
            for optim in self._named_optimizers.values():
                sharding.shard_optimizer_state(optim)


def idle_pass(model, device) -> None:
    """A zero-weight forward and backward on one token: a sharded rank out of rows still joins its peers' gathers
    and reduce-scatters, contributing zero gradients."""
    out = model(input_ids=torch.zeros((1, 1), dtype=torch.long, device=device), use_cache=False)
    (out.logits.float().sum() * 0.0).backward()
