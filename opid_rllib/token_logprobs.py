"""Per-token log-probs of given responses under given prompts: the one layout every caller shares.

Ray-free on purpose: the RL module, the learner (KL reference), the re-scoring connector and
`opid-sft` all use these two functions, so their numbers agree exactly.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch


def pack(prompt_ids: Sequence[Sequence[int]], response_ids: Sequence[Sequence[int]], pad_id: int):
    """Left-pad prompts and right-pad responses into numpy arrays (the batch layout we ship)."""
    n = len(prompt_ids)
    p_w = max([len(p) for p in prompt_ids] + [1])
    r_w = max([len(r) for r in response_ids] + [1])
    prompts = np.full((n, p_w), pad_id, dtype=np.int64)
    responses = np.full((n, r_w), pad_id, dtype=np.int64)
    for i, (p, r) in enumerate(zip(prompt_ids, response_ids)):
        if len(p):
            prompts[i, p_w - len(p):] = p
        if len(r):
            responses[i, : len(r)] = r
    return {"prompt_ids": prompts, "prompt_len": np.array([len(p) for p in prompt_ids], np.int64),
            "response_ids": responses, "response_len": np.array([len(r) for r in response_ids], np.int64)}


def length_order(prompt_len, response_len) -> torch.Tensor:
    """Row order for micro-batching, shortest first: each micro-batch then pads to its neighbours'
    length, not to the batch's longest prompt (the learner and every `score()` pass use it)."""
    return torch.argsort(torch.as_tensor(prompt_len) + torch.as_tensor(response_len), stable=True)


def response_logprobs(model, prompt_ids: torch.Tensor, prompt_len: torch.Tensor, response_ids: torch.Tensor,
                      response_len: torch.Tensor, temperature: float = 1.0, with_entropy: bool = False):
    """log pi(y_l | x, y_<l) for every response token, as a [B, R] tensor (0 beyond response_len).

    prompt_ids are left-padded, response_ids right-padded. Columns that are padding in every
    row are trimmed before the forward pass, so a micro-batch of short prompts stays cheap.
    """
    b, p_w = prompt_ids.shape
    r_w = response_ids.shape[1]
    p_max = max(int(prompt_len.max()), 1)
    r_max = max(int(response_len.max()), 1)
    prompts = prompt_ids[:, p_w - p_max:]
    resp = response_ids[:, :r_max]
    cols = torch.arange(p_max, device=prompts.device)
    p_mask = cols.unsqueeze(0) >= (p_max - prompt_len).unsqueeze(1)
    r_mask = torch.arange(r_max, device=resp.device).unsqueeze(0) < response_len.unsqueeze(1)
    input_ids = torch.cat([prompts, resp], dim=1)
    attn = torch.cat([p_mask, r_mask], dim=1).long()
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    # Only the last r_max + 1 positions go through the lm head; position p_max - 1 + l predicts
    # response token l, so the first r_max of them are the ones we need.
    out = model(input_ids=input_ids, attention_mask=attn, position_ids=pos, use_cache=False,
                logits_to_keep=r_max + 1)
    logits = out.logits[:, :r_max, :].float() / float(temperature)
    logp_all = torch.log_softmax(logits, dim=-1)
    # torch.where, not "* r_mask": a vocabulary entry whose logit is -inf (masked, unused, an fp16 overflow) has
    # log-prob -inf, and -inf * 0 (padding) or p * log p = 0 * -inf would be NaN.
    logp = torch.where(r_mask, logp_all.gather(-1, resp.unsqueeze(-1)).squeeze(-1), 0.0)
    ent = None
    if with_entropy:
        p = logp_all.exp()
        ent = -(p * logp_all).sum(-1)
        # p * log p saves 8 B per logit for backward and the NaN-safe form 13, so the latter runs only when the
        # former gave a NaN (a B x R check, not one over the vocabulary); the first graph is then dropped.
        if bool(torch.isnan(ent).any()):
            ent = -(p * torch.where(p > 0, logp_all, 0.0)).sum(-1)
        ent = torch.where(r_mask, ent, 0.0)
    if r_max < r_w:  # pad back to the batch's response width
        pad = torch.zeros(b, r_w - r_max, device=logp.device, dtype=logp.dtype)
        logp = torch.cat([logp, pad], dim=1)
        ent = torch.cat([ent, pad], dim=1) if ent is not None else None
    return logp, ent
