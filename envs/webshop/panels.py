"""Fixed WebShop panels. Ids come from the offline world's test split, which is built round-robin
over the 10 categories, so every prefix of it is category-balanced.

webshop/test@v1   all 120 test instructions (12 per category; target products unseen in train)
webshop/smoke@v1  the first 10 (one per category), for quick checks
"""

from __future__ import annotations

from envs.panels import Panel, register_panel

TEST_SIZE = 120
SMOKE_SIZE = 10


def _ids(n: int) -> tuple[str, ...]:
    # Must equal build_world(0).splits["test"][:n]; tests/envs/test_webshop_panels.py checks it.
    return tuple(f"webshop-test-{i:04d}" for i in range(n))


register_panel("webshop/test@v1", lambda: Panel("webshop/test@v1", "webshop", "test", _ids(TEST_SIZE), {"seed": 0}))
register_panel("webshop/smoke@v1", lambda: Panel("webshop/smoke@v1", "webshop", "test", _ids(SMOKE_SIZE), {"seed": 0}))
