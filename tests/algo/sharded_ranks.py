"""Two gloo learner processes for the sharding tests: one spawn does every check that needs the ranks (builds are
the cost), and writes what each rank saw to a file the tests compare against one unsharded learner."""

from __future__ import annotations

import datetime
import os
import socket

import torch
import torch.distributed as dist

# Rows of the shared batch each rank trains on: unequal rows, tokens and micro-batch counts (2 vs 3 at size 2).
RANK_ROWS = (range(0, 3), range(3, 8))
N_ROWS = 8


def learner(sharding: str = "none", num_learners: int = 0, **kw):
    from envs.base import text_space
    from tests.algo.helpers import tiny_config

    cfg = tiny_config(micro_batch_size=2, score_micro_batch_size=2, kl_coeff=0.01, lr=1e-4, **kw)
    cfg.learners(num_learners=num_learners)
    cfg.llm(sharding=sharding)
    return cfg.build_learner(spaces={"default_policy": (text_space(), text_space())})


def batch(module, n: int = N_ROWS, seed: int = 0) -> dict:
    """A real batch: encoded prompts of different lengths, random responses, old log-probs, +-1 advantages."""
    from opid_rllib.token_logprobs import pack

    g = torch.Generator().manual_seed(seed)
    ids, _ = module.encode_prompts([f"Question {i}: who wrote the book?" * (1 + i % 3) for i in range(n)])
    resp = [torch.randint(10, 1000, (2 + (5 * i) % 7,), generator=g).tolist() for i in range(n)]
    b = {k: torch.as_tensor(v) for k, v in pack(ids, resp, module.pad_id).items()}
    mask = (torch.arange(b["response_ids"].shape[1])[None] < b["response_len"][:, None]).float()
    old = torch.randn(mask.shape, generator=g) * 0.1 - 7.0
    adv = torch.where(torch.arange(n)[:, None] % 3 == 0, 1.0, -0.5) * mask
    return {**b, "response_mask": mask, "old_logp": old, "advantages": adv, "ids": ids, "resp": resp}


def train_rows(b: dict, rows) -> dict:
    rows = torch.as_tensor(list(rows))
    return {k: v[rows] for k, v in b.items() if isinstance(v, torch.Tensor)}


def update(lrn, data: dict) -> dict:
    """One update; the global loss, the clipped gradient norm, the whole gradients and weights after the step."""
    from opid_rllib.sharding import full_state

    _, losses, _ = lrn._uncompiled_update({"default_policy": data})
    lrn.after_gradient_based_update(timesteps={})  # as Learner.update ends: a sharded learner gathers its weights
    results = lrn.metrics.reduce()
    norm = [v for k, v in results["default_policy"].items() if k.endswith("global_norm")]
    model = lrn.module["default_policy"].unwrapped().model
    grads = {n: (p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad).detach().clone()
             for n, p in model.named_parameters()}
    weights, _ = full_state(model)
    return {"loss": float(losses["default_policy"]), "grad_norm": float(norm[0]), "grads": grads,
            "weights": weights}


def rescore(lrn, b: dict, rows) -> list:
    """The learner connector's scoring, as the learner runs it: inside `_make_batch_if_necessary`, this rank's rows."""
    from ray.rllib.core.learner.training_data import TrainingData

    module = lrn.module["default_policy"].unwrapped()
    out = []

    def connector(*, rl_module, batch, **kw):
        out.extend(module.score([b["ids"][i] for i in rows], [b["resp"][i] for i in rows]))
        return {}

    lrn._learner_connector = connector
    lrn._make_batch_if_necessary(TrainingData(episodes=[]))
    return out


def per_rank_bytes(lrn) -> dict:
    """Bytes this learner holds of parameters, gradients and optimizer state (a shard counts its own part)."""
    from opid_rllib.sharding import local_bytes

    model = lrn.module["default_policy"].unwrapped().model
    params = list(model.parameters())
    optim = [v for o in lrn._named_optimizers.values() for st in o.state.values() for v in st.values()
             if isinstance(v, torch.Tensor) and v.dim() > 0]
    return {"params": local_bytes(params), "grads": local_bytes([p.grad for p in params if p.grad is not None]),
            "optimizer": local_bytes(optim)}


def run_rank(rank: int, port: int, out_dir: str) -> None:
    """Everything the 2-rank tests read, computed on this rank: the sharded learner (re-score, update, bytes,
    checkpoint round trip), then today's all-reduce learner on the same rows."""
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=90))
    try:
        out: dict = {}
        lrn = learner("fsdp", num_learners=2, gradient_checkpointing=True)  # as the GPU recipes run it
        b = batch(lrn.module["default_policy"].unwrapped())
        rows = RANK_ROWS[rank]
        out["rescore"] = rescore(lrn, b, rows)
        out["fsdp"] = update(lrn, train_rows(b, rows))
        out["fsdp_bytes"] = per_rank_bytes(lrn)
        # Checkpoint round trip: RLlib asks rank 0 for the state and hands it to every learner.
        lrn.stage_checkpoint()
        saved = [lrn.get_state() if rank == 0 else None]
        dist.broadcast_object_list(saved, src=0)
        b2 = batch(lrn.module["default_policy"].unwrapped(), seed=1)
        after = update(lrn, train_rows(b2, rows))["weights"]
        lrn.set_state(saved[0])
        again = update(lrn, train_rows(b2, rows))["weights"]
        out["resume"] = {"moved": any(not torch.equal(v, saved_w) for v, saved_w in zip(
            after.values(), (saved[0]["rl_module"]["default_policy"]["model." + k] for k in after))),
            "equal": all(torch.equal(v, again[k]) for k, v in after.items())}
        out["saved_module"] = saved[0]["rl_module"]["default_policy"] if rank == 0 else None
        del lrn
        ddp = learner("none", num_learners=2)
        out["allreduce"] = update(ddp, train_rows(b, rows))
        torch.save(out, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def unsharded_reference() -> dict:
    """The 1-learner update on all rows, its scores and its bytes (no process group)."""
    lrn = learner("none", num_learners=0)
    b = batch(lrn.module["default_policy"].unwrapped())
    module = lrn.module["default_policy"].unwrapped()
    scores = module.score(b["ids"], b["resp"])
    initial = {k: v.detach().clone() for k, v in module.model.state_dict().items()}
    res = update(lrn, train_rows(b, range(N_ROWS)))
    tokens = [float(b["response_mask"][list(rows)].sum()) for rows in RANK_ROWS]
    return {"update": res, "scores": scores, "bytes": per_rank_bytes(lrn), "initial": initial,
            "rank_tokens": tokens}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
