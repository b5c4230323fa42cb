"""Does a warm-started model reproduce its demonstrator? Greedy reproduction of each demonstrated response,
split by the verb of the demonstrated command.

Why: the SFT loss is a token mean dominated by format tokens ('<think></think>', '<action>', the EOS), so a
low loss says little about the one or two tokens that decide a step ('take' or 'go', which object). This
counts, per demonstrated state, whether greedy decoding would write exactly the demonstrated response:
teacher-forced argmax at every response token equals the target (the same thing, without decoding). On the
training games it says whether the model fits its data; on an unseen split, whether it generalises.
"""

from __future__ import annotations

from typing import Sequence


def reproduced(model, tokenizer, demos: Sequence, max_prompt_len: int = 2048,
               enable_thinking: bool = False) -> list[bool]:
    """Per demo: would greedy decoding from its prompt write its response (EOS included)?"""
    import torch

    from opid_rllib.sft.train import encode_demos

    prompts, responses, _ = encode_demos(tokenizer, demos, max_prompt_len, enable_thinking)
    out = []
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for p, r in zip(prompts, responses):
                logits = model(torch.tensor([p + r])).logits[0]
                pred = logits[len(p) - 1:len(p) + len(r) - 1].argmax(-1).tolist()
                out.append(pred == list(r))
    finally:
        if was_training:
            model.train()
    return out


def by_verb(demos: Sequence, hits: Sequence[bool]) -> dict[str, dict[str, float]]:
    """{verb: {"states", "reproduced", "pct"}} plus "all", verbs ordered by how often they were demonstrated
    (verbs as opid-eval's agreement split names them: opid_rllib.paper_table.command_kind)."""
    from opid_rllib.paper_table import command_kind

    counts: dict[str, list[int]] = {}
    for d, ok in zip(demos, hits):
        c = counts.setdefault(command_kind(d.action), [0, 0])
        c[0] += 1
        c[1] += int(bool(ok))
    rows = sorted(counts.items(), key=lambda kv: -kv[1][0])
    rows.append(("all", [len(hits), int(sum(bool(h) for h in hits))]))
    return {k: {"states": n, "reproduced": r, "pct": round(100.0 * r / n, 1) if n else 0.0} for k, (n, r) in rows}


def format_by_verb(table: dict[str, dict[str, float]]) -> str:
    return ", ".join(f"{k} {v['pct']:.1f} ({v['reproduced']}/{v['states']})" for k, v in table.items())
