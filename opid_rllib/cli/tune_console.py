"""What Ray Tune prints while `opid-train` runs: Tune's own reporter and verbosity, Ray's own colour switch.

Why: a 2-iteration, 4-minute run printed Tune's status table 48 times (654 lines), one ~13,000-character "Trial ...
reported ... with parameters={the whole config}" line per iteration, and raw ANSI colour codes in the worker prefixes
when stdout was a file. The full results stay in TensorBoard, result.json and progress.csv; the console gets a
few columns at most every 30 s.
"""

from __future__ import annotations

import os
import sys

# The status table's columns: the keys our results carry (groups.py logs opid/*, the learner its kl_ref).
STATUS_COLUMNS = {
    "training_iteration": "iter",
    "opid/success_rate": "success",
    "opid/format_valid_rate": "format ok",
    "learners/default_policy/kl_ref": "kl",
    "time_this_iter_s": "iter time (s)",
}
EVAL_COLUMN = {"evaluation/success_rate": "eval success"}


def status_reporter(every_s: int, with_eval: bool = False):
    """Tune's CLIReporter with STATUS_COLUMNS, at most one table per `every_s` seconds (and one at the end).

    print_intermediate_tables=True: at verbosity 1 Tune would otherwise print the trial table only at the end."""
    from ray import tune

    columns = dict(STATUS_COLUMNS, **(EVAL_COLUMN if with_eval else {}))
    return tune.CLIReporter(metric_columns=columns, max_report_frequency=every_s, print_intermediate_tables=True)


def plain_console_env(environ=None, stdout=None) -> dict:
    """Ray's console settings for this process, set before Ray starts (returned: what was set).

    RAY_AIR_NEW_OUTPUT=0: Tune's newer console output ignores a custom reporter. RAY_COLOR_PREFIX=0 when stdout is
    not a terminal: Ray's driver then prints its workers' "(OPID pid=...)" prefixes without colour codes (read
    at each print, ray/_private/worker.py). A value the user set is kept."""
    environ = os.environ if environ is None else environ
    stdout = sys.stdout if stdout is None else stdout
    wanted = {"RAY_AIR_NEW_OUTPUT": "0"}
    if not _is_terminal(stdout):
        wanted["RAY_COLOR_PREFIX"] = "0"
    set_now = {k: v for k, v in wanted.items() if k not in environ}
    environ.update(set_now)
    return set_now


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False
