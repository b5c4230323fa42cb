"""Known-harmless notices of Ray, RLlib and transformers, silenced where they start; one torch thread on CPU.

Why: a first run printed RLlib's "new API stack" notice, its `RLModule(config=...)` deprecation (RLlib's own
RLModule.__init__ builds the deprecated RLModuleConfig), Tune's "Install gputil" (no GPU to monitor on a CPU
machine), Ray's "token authentication is enabled" (its secure default) and transformers' weight bars, in
every process, around the run's own lines. Each is taken out by name, so any other warning still shows.
"""

from __future__ import annotations

import logging
import os

# ray.util.log_once keys that RLlib's one-time notices use: taking a key first means the notice never prints.
_ONCE_KEYS = (
    "OPID_on_new_api_stack",  # OPID runs only on the new API stack: the notice that it is the default says nothing
    "RLModule(config=[RLModuleConfig object])",  # RLlib's RLModule.__init__ builds the deprecated config itself
)
_GPUTIL = "Install gputil for GPU system monitoring."


class _Drop(logging.Filter):
    """Drops the records whose message starts with `prefix` (one known notice; the logger's others pass)."""

    def __init__(self, prefix: str):
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.prefix)


# One of each, so a second call adds nothing (logging keeps filters by identity).
_DROP_GPUTIL, _DROP_RAY_STARTED = _Drop(_GPUTIL), _Drop("Started a local Ray instance")
_DROP_AUTH_ON = _Drop("Token authentication is enabled for this Ray cluster.")


def silence_ray_notices() -> None:
    """Run at import of the algorithm and the RLModule, i.e. in every process that builds one (driver, env
    runners, learners, Tune's trial actor)."""
    from ray.util import log_once

    for key in _ONCE_KEYS:
        log_once(key)
    if not _has_cuda():  # on a GPU machine the hint is real: GPU use is missing from the results
        logging.getLogger("ray.tune.utils.util").addFilter(_DROP_GPUTIL)


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        return False


def quiet_ray_start() -> None:
    """Before `ray.init`: Ray's "Started a local Ray instance." (the CLI names Ray's session folder instead) and its
    notice that it turned token authentication on by default (the secure default, nothing to do). Setting
    RAY_AUTH_MODE=token ourselves would say the same without the notice, but Ray reads its config at import: the
    GCS then refused the driver's connection."""
    logging.getLogger("ray._private.worker").addFilter(_DROP_RAY_STARTED)
    logging.getLogger("ray._private.authentication.authentication_token_setup").addFilter(_DROP_AUTH_ON)


TORCH_THREADS_ENV = "OPID_TORCH_THREADS"  # a CLI's --torch-threads, inherited by the processes it starts (Ray's)


def default_torch_threads(requested: int | None) -> int | None:
    """Torch CPU threads for this process: `requested`, else $OPID_TORCH_THREADS (a CLI's --torch-threads), else
    torch's own when OMP_NUM_THREADS is set (the user's choice) or CUDA is there, else 1.

    Why 1: the models here are small and the machines shared; under load `opid-eval --model tiny --episodes 2`
    ran 7-16x slower with torch's two threads than with one (README, Usage)."""
    if requested is None and os.environ.get(TORCH_THREADS_ENV):
        requested = int(os.environ[TORCH_THREADS_ENV])
    if requested is not None:
        return int(requested)
    return None if os.environ.get("OMP_NUM_THREADS") or _has_cuda() else 1


def apply_torch_threads(requested: int | None) -> int | None:
    """torch.set_num_threads(default_torch_threads(requested)); returns the previous count (None: unchanged)."""
    n = default_torch_threads(requested)
    if n is None:
        return None
    import torch

    before = torch.get_num_threads()
    if before != n:
        torch.set_num_threads(n)
    return before


def set_cli_torch_threads(requested: int | None) -> None:
    """A CLI's --torch-threads N: this process now and every process it starts (env runners, learners); None
    leaves the default (default_torch_threads)."""
    if requested is not None:
        os.environ[TORCH_THREADS_ENV] = str(int(requested))
    apply_torch_threads(requested)
