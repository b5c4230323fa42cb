"""Behaviour-cloning warm start (`opid-sft`): train on the envs' expert trajectories.

Why: the tiny policy starts from random weights, so GRPO/OPID would see all-zero rewards. Cloning
the expert (info["expert_actions"][0]) on the *same* per-step prompts the env runner builds gives
RL a non-zero vanilla success rate to improve on. The demonstrations (prompts, responses, skills)
come from opid_rllib/sft/demos.py; this module tokenizes them with the RL module's own function
(`prompts.chat.encode_prompts`: chat template, no special tokens, left truncation; responses end
with the EOS the HF backend stops on) and trains. Each epoch end writes a checkpoint
(sft/checkpoint.py) that a re-run with the same settings resumes from; progress lines with an ETA
go to stderr (sft/progress.py).

Training: loss on response tokens only (token mean over each optimizer batch), AdamW with linear
warm-up and cosine decay, length-bucketed batches split into micro-batches by a padded-token
budget. The log-probs use the RL learner's own functions (`token_logprobs.pack`: left-padded prompts,
right-padded responses, position ids from the attention mask); only the logits of response
positions are computed (`logits_to_keep`); that module is Ray-free, so `opid-sft` does not import Ray.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from opid_rllib.prompts.chat import encode_prompts
from opid_rllib.settings import SFT_DTYPE_NAMES
from opid_rllib.sft import checkpoint
from opid_rllib.sft.demos import Demo
from opid_rllib.sft.progress import Progress
from opid_rllib.token_logprobs import pack, response_logprobs

STATS_FILE = "sft_stats.json"

# ---- tokenization -------------------------------------------------------------------------------
def encode_response(tokenizer, response: str) -> list[int]:
    """Response tokens + the EOS the generation backend stops on (<|im_end|> for our template)."""
    eos = tokenizer.eos_token_id
    if eos is None:
        raise ValueError("tokenizer has no eos_token: SFT needs one to teach the policy to stop")
    return list(tokenizer(response, add_special_tokens=False)["input_ids"]) + [int(eos)]


def encode_demos(tokenizer, demos: Sequence[Demo], max_prompt_len: int,
                 enable_thinking: bool = False) -> tuple[list[list[int]], list[list[int]], int]:
    prompts, cut = encode_prompts(tokenizer, [d.prompt for d in demos], max_prompt_len, enable_thinking)
    responses = [encode_response(tokenizer, d.response) for d in demos]
    return prompts, responses, int(sum(cut))


# ---- batching -----------------------------------------------------------------------------------
def length_batches(lengths: Sequence[int], batch_size: int, rng: np.random.Generator) -> list[list[int]]:
    """Bucket by length: sort (random tie-break), cut into batches, shuffle the batch order."""
    n = len(lengths)
    tie = rng.random(n)
    order = sorted(range(n), key=lambda i: (lengths[i], tie[i]))
    batches = [order[s:s + batch_size] for s in range(0, n, batch_size)]
    perm = rng.permutation(len(batches))
    return [batches[int(i)] for i in perm]


def micro_batches(idx: list[int], lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Split a batch so that rows x longest row stays within `max_tokens` padded tokens."""
    out, cur, longest = [], [], 0
    for i in sorted(idx, key=lambda j: lengths[j]):
        new_longest = max(longest, lengths[i])
        if cur and new_longest * (len(cur) + 1) > max_tokens:
            out.append(cur)
            cur, new_longest = [], lengths[i]
        cur.append(i)
        longest = new_longest
    if cur:
        out.append(cur)
    return out


def demo_loss(model, prompt_ids: Sequence[Sequence[int]], response_ids: Sequence[Sequence[int]], pad_id: int,
              micro_batch_size: int = 8) -> float:
    """Token-mean negative log-likelihood of the responses (no grad): the SFT loss without an update."""
    import torch

    total, n = 0.0, 0
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for s in range(0, len(prompt_ids), micro_batch_size):
                b = {k: torch.as_tensor(v) for k, v in pack(prompt_ids[s:s + micro_batch_size],
                                                             response_ids[s:s + micro_batch_size], pad_id).items()}
                logp = response_logprobs(model, b["prompt_ids"], b["prompt_len"], b["response_ids"],
                                         b["response_len"])[0]
                total += float(-logp.sum())
                n += int(b["response_len"].sum())
    finally:
        if was_training:
            model.train()
    return total / max(1, n)


def _lr_at(step: int, total: int, base: float, warmup: int, time_frac: float = 0.0, schedule: str = "cosine") -> float:
    """Linear warm-up, then cosine decay to 10% of `base` ("constant": `base` after the warm-up). With a time budget
    the decay follows whichever is further along: the steps or the budget (`time_frac`), so a run cut by the budget
    still ends at a low learning rate."""
    if warmup > 0 and step < warmup:
        return base * (step + 1) / warmup
    if schedule == "constant":
        return base
    frac = max((step - warmup) / max(1, total - warmup), float(time_frac))
    return base * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(1.0, frac))))


# ---- training -----------------------------------------------------------------------------------
def train_sft(model_path, demos: Sequence[Demo], out_dir, *, epochs: int, lr: float, batch_size: int,
              max_prompt_len: int, seed: int, weight_decay: float = 0.0, warmup_frac: float = 0.05,
              max_grad_norm: float = 1.0, max_tokens_per_micro: int = 8192, enable_thinking: bool = False,
              log_every: int = 0, time_budget_s: float | None = None, final_loss_samples: int = 32,
              resume: bool = True, progress_every_s: float = 10.0, dtype: str = "float32",
              lr_schedule: str = "cosine", log: Callable[[str], None] | None = print) -> Path:
    """Behaviour cloning of `demos` into the model at `model_path`; writes a HF folder to `out_dir`
    (weights, tokenizer, generation config, and `sft_stats.json` with the loss curve).

    Every epoch end saves `out_dir/sft_checkpoint/` (model, optimizer, RNG, epoch/step); with
    `resume` a later call with the same settings continues from it and ends with the weights an
    uninterrupted run gives (checkpoint.ResumeMismatch if the settings differ); it is removed once
    the final model is written. Progress lines (step/total, loss, elapsed, ETA) go to stderr at most
    every `progress_every_s` seconds (< 0: none); log_every > 0 also logs the loss every that many
    steps. time_budget_s stops training after the optimizer step that crosses the budget; the lr
    decay then also tracks the elapsed fraction of the budget (not bit-reproducible). The trained
    model's loss on the first `final_loss_samples` demos (no dropout, no update) is recorded as
    `final_eval_loss`, so a reload of the folder can be checked against it.

    lr_schedule: "cosine" (warm-up, then decay to 10 %) or "constant" (warm-up, then `lr`): a skill-copy stage
    forms its copy after a plateau (bench/signpost_copy_probe.py), which a decaying rate can outlast.

    dtype "bfloat16": fp32 weights and AdamW state, forward and backward under bf16 autocast (the RL
    learner's mixed precision); the saved weights stay fp32. The speed-up needs bf16 matmuls in hardware
    (AVX512-BF16, AMX or a GPU): `python -m bench.dtype_speed` measures it on the machine at hand."""
    import torch

    from opid_rllib.models import load_model, load_tokenizer
    from opid_rllib.models.cache import quiet_progress

    if not demos:
        raise ValueError("train_sft: no demonstrations (did the expert win any episode?)")
    for key, val, ok in (("epochs", epochs, int(epochs) >= 1), ("batch_size", batch_size, int(batch_size) >= 1),
                         ("lr", lr, float(lr) > 0), ("max_prompt_len", max_prompt_len, int(max_prompt_len) >= 16),
                         ("lr_schedule", lr_schedule, lr_schedule in ("cosine", "constant"))):
        if not ok:
            raise ValueError(f"{key}={val}: invalid (epochs/batch_size >= 1, lr > 0, max_prompt_len >= 16)")
    if dtype not in SFT_DTYPE_NAMES:
        raise ValueError(f"dtype={dtype!r}: use one of {SFT_DTYPE_NAMES} (float16 would need loss scaling)")
    t_start = time.perf_counter()
    say = log or (lambda _msg: None)
    torch.manual_seed(int(seed))
    tokenizer = load_tokenizer(model_path)
    model = load_model(model_path, dtype="float32")
    model.config.use_cache = False
    device = next(model.parameters()).device.type
    autocast = (lambda: torch.autocast(device_type=device, dtype=torch.bfloat16)) if dtype == "bfloat16" \
        else contextlib.nullcontext
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    prompts, responses, n_cut = encode_demos(tokenizer, demos, max_prompt_len, enable_thinking)
    lengths = [len(p) + len(r) for p, r in zip(prompts, responses)]
    n_resp_tokens = int(sum(len(r) for r in responses))
    rng = np.random.default_rng(int(seed))
    steps_per_epoch = math.ceil(len(demos) / int(batch_size))
    total_steps = steps_per_epoch * int(epochs)
    warmup = int(round(warmup_frac * total_steps))
    decay, no_decay = [], []
    for n_, p_ in model.named_parameters():
        (no_decay if p_.ndim < 2 or "norm" in n_ else decay).append(p_)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": float(weight_decay)},
                             {"params": no_decay, "weight_decay": 0.0}], lr=float(lr), betas=(0.9, 0.95), eps=1e-8)
    say(f"[opid-sft] {len(demos)} demos, {sum(lengths)} tokens ({n_resp_tokens} response), "
        f"{n_cut} prompts truncated to {max_prompt_len}; {epochs} epochs x {steps_per_epoch} steps")

    fp = checkpoint.fingerprint({"base_model": str(model_path), "epochs": int(epochs), "lr": float(lr),
                                 "batch_size": int(batch_size), "seed": int(seed), "weight_decay": float(weight_decay),
                                 "warmup_frac": float(warmup_frac), "max_grad_norm": float(max_grad_norm),
                                 "max_tokens_per_micro": int(max_tokens_per_micro),
                                 **({} if lr_schedule == "cosine" else {"lr_schedule": lr_schedule}),
                                 **({} if dtype == "float32" else {"dtype": dtype})}, prompts, responses)
    if not resume:
        checkpoint.remove(out_dir)
    state = checkpoint.load(out_dir, fp) if resume else None
    step, first_epoch, prev_s = 0, 0, 0.0
    curve: list[dict[str, float]] = []
    if state is not None:
        checkpoint.restore(state, model=model, opt=opt, rng=rng)
        step, first_epoch, curve, prev_s = state["step"], state["epoch"], list(state["curve"]), state["seconds"]
        say(f"[opid-sft] resuming from {checkpoint.path_in(out_dir)}: epoch {first_epoch}/{epochs} done, "
            f"step {step}/{total_steps}")
    progress = Progress(total_steps, every_s=progress_every_s, start_step=step)
    elapsed = lambda: prev_s + time.perf_counter() - t_start  # noqa: E731 - includes the resumed part

    model.train()
    stopped_early = False
    cur_lr = float(lr)
    for epoch in range(first_epoch, int(epochs)):
        t_ep = time.perf_counter()
        ep_loss_sum, ep_tokens = 0.0, 0
        win_sum, win_tok = 0.0, 0
        step_losses: list[float] = []  # each step's token-mean loss: step 1's is the pretrained weights' on one batch
        for batch in length_batches(lengths, int(batch_size), rng):
            if time_budget_s is not None and elapsed() > float(time_budget_s):
                stopped_early = True
                break
            time_frac = elapsed() / float(time_budget_s) if time_budget_s else 0.0
            cur_lr = _lr_at(step, total_steps, float(lr), warmup, time_frac, lr_schedule)
            for g in opt.param_groups:
                g["lr"] = cur_lr
            n_tok = sum(len(responses[i]) for i in batch)
            step_sum = 0.0
            opt.zero_grad(set_to_none=True)
            for mb in micro_batches(batch, lengths, int(max_tokens_per_micro)):
                b = {k: torch.as_tensor(v) for k, v in pack([prompts[i] for i in mb], [responses[i] for i in mb],
                                                             pad_id).items()}
                with autocast():
                    logp = response_logprobs(model, b["prompt_ids"], b["prompt_len"], b["response_ids"],
                                             b["response_len"])[0]
                nll = -logp.float().sum()
                (nll / n_tok).backward()
                step_sum += float(nll.detach())
            ep_loss_sum += step_sum
            win_sum += step_sum
            step_losses.append(step_sum / max(1, n_tok))
            ep_tokens += n_tok
            win_tok += n_tok
            if max_grad_norm and max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), float(max_grad_norm))
            opt.step()
            step += 1
            progress.update(step, **{"epoch-mean loss": ep_loss_sum / max(1, ep_tokens)})
            if log_every and step % int(log_every) == 0:
                say(f"[opid-sft]   step {step}/{total_steps}: loss {win_sum / max(1, win_tok):.4f}, lr {cur_lr:.2e}, "
                    f"{elapsed():.0f}s")
                win_sum, win_tok = 0.0, 0
        if ep_tokens == 0:
            break
        loss = ep_loss_sum / max(1, ep_tokens)
        curve.append({"epoch": epoch + 1, "loss": loss, "lr": cur_lr, "seconds": time.perf_counter() - t_ep,
                      "step_losses": step_losses})
        if not stopped_early:  # a whole epoch: the state a resumed run starts the next epoch from
            checkpoint.save(out_dir, model=model, opt=opt, rng=rng, fp=fp, epoch=epoch + 1, step=step, curve=curve,
                            seconds=elapsed())
        say(f"[opid-sft] epoch {epoch + 1}/{epochs}: training loss {loss:.4f}, the token mean over the epoch's "
            f"{len(step_losses)} steps ({ep_tokens} response tokens) while the weights learned (first step "
            f"{step_losses[0]:.4f}, last {step_losses[-1]:.4f}), lr {cur_lr:.2e}, {time.perf_counter() - t_ep:.1f}s"
            f"{'' if stopped_early else '; checkpoint saved'}")
        if stopped_early:
            say(f"[opid-sft] time budget {time_budget_s}s reached after {step} of {total_steps} steps")
            break

    model.eval()
    k = min(len(demos), max(0, int(final_loss_samples)))
    final_eval = demo_loss(model, prompts[:k], responses[:k], pad_id) if k else None
    if final_eval is not None:
        say(f"[opid-sft] trained model: loss {final_eval:.4f} on the first {k} (training) demos, scored once with "
            "the final weights, no dropout: below the epoch's mean, which averages the whole epoch's learning")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.config.use_cache = True
    with quiet_progress():
        model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    stats = {"base_model": str(model_path), "demos": len(demos), "tokens": int(sum(lengths)),
             "response_tokens": n_resp_tokens, "prompts_truncated": n_cut, "epochs": int(epochs),
             "optimizer_steps": step, "lr": float(lr), "batch_size": int(batch_size),
             "max_prompt_len": int(max_prompt_len), "seed": int(seed), "dtype": dtype, "loss_curve": curve,
             "final_loss": curve[-1]["loss"] if curve else None,
             "final_eval_loss": final_eval, "final_eval_samples": k, "resumed_from_epoch": first_epoch,
             "stopped_early": stopped_early, "train_seconds": elapsed()}
    (out / STATS_FILE).write_text(json.dumps(stats, indent=2) + "\n")
    checkpoint.remove(out)
    return out
