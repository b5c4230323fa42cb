"""How many labelled steps the tiny model needs to read a Signpost sign (why rung 0 fixes the sign's colour).

    python -m bench.signpost_copy_probe [--steps 300] [--lr 1e-3] [--batch 16] [--json OUT]

Supervised, the easiest case there is: every sample is a signed room (no graffiti) whose target is the door the
sign names, the only colour in the prompt. Every 50 AdamW steps it prints the model's mean probability of the
right door among the four on 64 valid-split rooms (0.25 = not reading). The RL loop sees one noisy outcome per
episode instead of a label per step, so a task the model needs this many labels for is out of rung 0's minutes.
About 2 minutes for 300 steps on one core.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

COLOURS = ("red", "blue", "green", "yellow")


def _samples(tok, env, ids):
    """(prompt ids, response ids) of each room's first step, encoded as the warm start encodes its demos."""
    from opid_rllib.prompts import build_prompt, encode_prompts
    from opid_rllib.sft.responses import expert_response
    from opid_rllib.sft.train import encode_response

    prompts, responses = [], []
    for tid in ids:
        obs, info = env.reset(options={"task_id": tid})
        prompts.append(build_prompt("signpost", task=info["task"], obs=obs, admissible=info["admissible_actions"],
                                    history_length=2))
        responses.append(encode_response(tok, expert_response("signpost", task=info["task"],
                                                              action=info["expert_actions"][0], style="action")))
    prompt_ids, _ = encode_prompts(tok, prompts, 2048, False)
    return [(list(p), r) for p, r in zip(prompt_ids, responses)]


def p_right(model, samples, colour_ids) -> float:
    """Mean probability of the labelled door's colour token, renormalised over the four colours."""
    model.eval()
    probs = []
    with torch.no_grad():
        for p, r in samples:
            logits = model(torch.tensor([p + r])).logits[0]
            j = next(k for k, t in enumerate(r) if t in colour_ids)
            probs.append(torch.softmax(logits[len(p) + j - 1, colour_ids], -1)[colour_ids.index(r[j])].item())
    model.train()
    return float(np.mean(probs))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import envs
    from opid_rllib.models import resolve_model

    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    path = resolve_model("tiny")
    tok, model = AutoTokenizer.from_pretrained(path), AutoModelForCausalLM.from_pretrained(path)
    colour_ids = [tok.convert_tokens_to_ids("Ġ" + c) for c in COLOURS]
    train_env, valid_env = envs.make("signpost"), envs.make("signpost", split="valid")
    train = _samples(tok, train_env, train_env.task_ids()[:400])
    valid = _samples(tok, valid_env, valid_env.task_ids()[:64])
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95))
    curve, t0 = [{"step": 0, "p_right": p_right(model, valid, colour_ids)}], time.perf_counter()
    for step in range(1, args.steps + 1):
        loss = 0.0
        for k in rng.integers(len(train), size=args.batch):
            p, r = train[int(k)]
            loss = loss + model(torch.tensor([p + r]), labels=torch.tensor([[-100] * len(p) + r])).loss / args.batch
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0:
            curve.append({"step": step, "loss": round(loss.item(), 4), "p_right": p_right(model, valid, colour_ids)})
            print(f"step {step}: loss {loss.item():.4f}, P(right door) {curve[-1]['p_right']:.3f}, "
                  f"{time.perf_counter() - t0:.0f}s", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "curve": curve}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
