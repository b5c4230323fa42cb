"""Text environments for opid-rllib. `import envs` registers the gymnasium ids."""

from gymnasium.envs.registration import register, registry

# Short env names (used by the CLI and prompts) -> gymnasium id and entry point.
ENVS = {
    "alfworld": ("opid/ALFWorld-v0", "envs.alfworld.env:ALFWorldEnv"),
    "webshop": ("opid/WebShop-v0", "envs.webshop.env:WebShopEnv"),
    "searchqa": ("opid/SearchQA-v0", "envs.searchqa.env:SearchQAEnv"),
    "signpost": ("opid/Signpost-v0", "envs.signpost.env:SignpostEnv"),
}

for _name, (_gym_id, _entry) in ENVS.items():
    if _gym_id not in registry:
        register(id=_gym_id, entry_point=_entry, disable_env_checker=True)


def make(name: str, **kwargs):
    """Build an env by short name ("alfworld") or gymnasium id, unwrapped (no gym wrappers)."""
    import gymnasium as gym

    gym_id = ENVS[name][0] if name in ENVS else name
    if gym_id not in registry:
        raise ValueError(f"env={name!r}: unknown; choose one of {sorted(ENVS)}")
    return gym.make(gym_id, **kwargs).unwrapped


# Demonstrators a warm start can clone instead of the env's expert (`opid-sft --demonstrator`): short env
# name -> {kind: "module:Class"}; the class has reset(obs, info), act(obs, info) -> command | None and
# observe(command, obs). "expert" (info["expert_actions"][0]) needs no entry.
DEMONSTRATORS = {"alfworld": {"sweep": "envs.alfworld.sweep:SweepDemonstrator"}}


def make_demonstrator(name: str, kind: str):
    """A fresh demonstrator of `kind` for env `name`; None for "expert" (the env's own plan)."""
    if kind == "expert":
        return None
    short = env_name_of(name)
    entry = DEMONSTRATORS.get(short, {}).get(kind)
    if entry is None:
        have = ["expert", *sorted(DEMONSTRATORS.get(short, {}))]
        raise ValueError(f"demonstrator={kind!r}: env {short!r} has {have}")
    import importlib

    module, cls = entry.split(":")
    return getattr(importlib.import_module(module), cls)()


def env_name_of(name: str) -> str:
    """Map a gymnasium id or short name to the short name."""
    for short, (gym_id, _) in ENVS.items():
        if name in (short, gym_id):
            return short
    raise ValueError(f"env={name!r}: unknown; choose one of {sorted(ENVS)}")
