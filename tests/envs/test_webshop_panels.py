"""WebShop panels and content are pinned: a change here changes every reported number."""

from collections import Counter

from envs.panels import get_panel, list_panels
from envs.webshop.catalog import build_world

# Update only on purpose (and bump the panel version, e.g. @v2, when task ids change).
TEST_PANEL_SHA = "0da47bb149f50ca2dc07c58d83f36c9d29f464e21d329165c066facf201b14dd"
SMOKE_PANEL_SHA = "f3191770cdeabf8d4743d2faff296fffc8598200ca4522b0884fd6841c8b2152"
WORLD_FINGERPRINT = "9e343311416c934e9ad677ddcab7b930f11d20def3556603bd0294da1248feb4"


def test_panels_registered_and_pinned():
    assert {"webshop/test@v1", "webshop/smoke@v1"} <= set(list_panels())
    test, smoke = get_panel("webshop/test@v1"), get_panel("webshop/smoke@v1")
    assert test.sha256 == TEST_PANEL_SHA and smoke.sha256 == SMOKE_PANEL_SHA
    assert test.env == smoke.env == "webshop" and test.split == "test"


def test_panels_match_world_and_are_balanced():
    w = build_world(0)
    test, smoke = get_panel("webshop/test@v1"), get_panel("webshop/smoke@v1")
    assert list(test.task_ids) == w.splits["test"] and set(smoke.task_ids) <= set(test.task_ids)
    for panel, per_cat in [(test, 12), (smoke, 1)]:
        counts = Counter(w.goals[t].category for t in panel.task_ids)
        assert len(counts) == 10 and set(counts.values()) == {per_cat}


def test_world_content_fingerprint():
    assert build_world(0).fingerprint() == WORLD_FINGERPRINT
    assert build_world(1).fingerprint() != WORLD_FINGERPRINT
