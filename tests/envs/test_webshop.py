"""Offline WebShop: reward formula, page flow, pagination, invalid actions, step cap, expert plans."""

import random

import pytest

import envs
from envs.webshop.catalog import ALL_ATTRIBUTES, CATEGORIES, Goal, Product, build_world
from envs.webshop.env import SUCCESS_REWARD, WebShopEnv
from envs.webshop.reward import get_reward, type_reward


def _product(**kw):
    base = dict(asin="B000000001", category="beauty", product_type="womens perfume", type_nouns=("perfume",),
                title="Lumora Long Lasting Womens Perfume - Floral", brand="Lumora",
                attributes=("long lasting", "cruelty free"), options={"size": ["3.4 fl oz", "6.7 fl oz"]},
                price=35.0, description="This womens perfume is long lasting and cruelty free. Vegan formula.",
                features=("LONG LASTING - nice.",))
    base.update(kw)
    return Product(**base)


def _goal(**kw):
    base = dict(asin="B000000001", category="beauty", product_type="womens perfume", type_nouns=("perfume",),
                instruction="i need ...", attributes=("long lasting", "paraben free"),
                options={"size": "3.4 fl oz"}, price_upper=40.0, query="long lasting womens perfume")
    base.update(kw)
    return Goal(**base)


# ---- reward (hand-computed) -------------------------------------------------------------
def test_reward_full_match_is_one():
    score, d = get_reward(_product(), _goal(attributes=("long lasting", "cruelty free")), {"size": "3.4 fl oz"})
    assert score == 1.0 and d["r_type"] == 1.0


def test_reward_partial_counts():
    # 1 of 2 attributes + 1 of 1 option + price ok = 3 / (2 + 1 + 1)
    assert get_reward(_product(), _goal(), {"size": "3.4 fl oz"})[0] == pytest.approx(0.75)
    # wrong option, price over the bound: 1 attr / 4
    assert get_reward(_product(price=45.0), _goal(), {"size": "6.7 fl oz"})[0] == pytest.approx(0.25)
    # no option chosen at all
    assert get_reward(_product(), _goal(), {})[0] == pytest.approx(0.5)


def test_reward_attribute_found_in_text():
    # "vegan formula" is not in the attribute list but the description says it (WebShop's fallback).
    g = _goal(attributes=("vegan formula",))
    assert get_reward(_product(), g, {"size": "3.4 fl oz"})[0] == 1.0


def test_type_reward_levels():
    other = _product(product_type="mens cologne", type_nouns=("cologne",), title="X Mens Cologne")
    assert type_reward(other, _goal())["r_type"] == 0.0  # no goal noun in the title
    assert get_reward(other, _goal(attributes=("long lasting",)), {"size": "3.4 fl oz"})[0] == 0.0
    far = _product(category="kitchen", product_type="coffee mug", title="Perfume Mug")
    assert type_reward(far, _goal())["r_type"] == 1.0  # title_score 1.0 > 0.2
    five = ("perfume", "spray", "mist", "scent", "bottle")  # 1 of 5 nouns: 0.2, not > 0.2 -> 0.5
    assert type_reward(far, _goal(type_nouns=five))["r_type"] == 0.5
    twenty = ("perfume",) + tuple(f"w{i}" for i in range(19))  # 1/20 < 0.1 -> 0.1
    assert type_reward(far, _goal(type_nouns=twenty))["r_type"] == 0.1


# ---- catalog invariants -----------------------------------------------------------------
def test_world_sizes_and_disjoint_splits():
    w = build_world(0)
    assert len(w.products) == 1000 and len({p.asin for p in w.products}) == 1000
    train, test = w.splits["train"], w.splits["test"]
    assert len(test) == 120 and len(train) > 1500
    assert not {w.goals[t].instruction for t in train} & {w.goals[t].instruction for t in test}
    assert not {w.goals[t].asin for t in train} & {w.goals[t].asin for t in test}


def test_product_text_only_mentions_own_attributes_and_type():
    w = build_world(0)
    nouns = {t: set(spec[0]) for _, (_, types) in CATEGORIES.items() for t, spec in types.items()}
    for p in w.products:
        text = " " + " ".join(p.text().replace(",", " ").replace(".", " ").replace("-", " ").split()) + " "
        assert not [a for a in ALL_ATTRIBUTES if a not in p.attributes and f" {a} " in text], p
        title = set(p.title.lower().split())
        assert not [t for t, n in nouns.items() if t != p.product_type and n & title], p.title


# ---- page flow --------------------------------------------------------------------------
def _env(**kw):
    return envs.make("webshop", split="test", **kw)


def test_make_and_contract():
    env = _env()
    assert isinstance(env, WebShopEnv) and env.max_steps == 15
    obs, info = env.reset(options={"task_id": "webshop-test-0000"})
    assert obs.startswith("WebShop [SEP] Instruction: [SEP] ") and obs.endswith(" [SEP] Search")
    assert info["admissible_actions"] == ["search[<your query>]"]
    assert info["task_type"] == "beauty" and info["task"] in obs and info["score"] == 0.0
    assert set(info["ground_truth"]) >= {"asin", "attributes", "options", "price_upper"}


def test_search_results_item_options_buy():
    env = _env()
    obs, info = env.reset(options={"task_id": "webshop-test-0003"})
    g = info["ground_truth"]
    obs, r, term, trunc, info = env.step(f"search[{' '.join(g['attributes'])} {g['product_type']}]")
    assert info["page"] == "results" and "Page 1 (Total results: " in obs and info["action_valid"]
    assert "click[back to search]" in info["admissible_actions"]
    asin = g["asin"].lower()
    if f"click[{asin}]" not in info["admissible_actions"]:  # not on page 1: use the expert's search
        _, info = env.reset(options={"task_id": "webshop-test-0003"})
        obs, r, term, trunc, info = env.step(info["expert_actions"][0])
    obs, r, term, trunc, info = env.step(f"click[{g['asin']}]")  # upper case works too
    assert info["page"] == "item" and "Buy Now" in obs and "click[description]" in info["admissible_actions"]
    obs, *_, info = env.step("click[description]")
    assert info["page"] == "description" and info["admissible_actions"] == ["click[back to search]", "click[< prev]"]
    obs, *_, info = env.step("click[< prev]")
    assert info["page"] == "item"
    for value in g["options"].values():
        obs, r, term, trunc, info = env.step(f"click[{value}]")
        assert info["action_valid"] and r == 0.0 and not term
    obs, r, term, trunc, info = env.step("click[buy now]")
    assert term and not trunc and r == SUCCESS_REWARD and info["won"] and info["score"] == 1.0
    assert obs.startswith("Thank you for shopping with us!")
    assert info["purchase"]["asin"] == g["asin"]


def test_buy_without_options_scores_partially():
    env = _env()
    _, info = env.reset(options={"task_id": "webshop-test-0001"})
    for a in info["expert_actions"][:2]:  # search, click the target
        _, _, _, _, info = env.step(a)
    _, r, term, _, info = env.step("click[buy now]")
    n_att, n_opt = len(info["ground_truth"]["attributes"]), len(info["ground_truth"]["options"])
    assert term and r == 0.0 and not info["won"]
    assert info["score"] == pytest.approx((n_att + 1) / (n_att + n_opt + 1))


def test_pagination():
    env = _env()
    env.reset(options={"task_id": "webshop-test-0000"})
    obs, _, _, _, info = env.step("search[black]")
    assert "Page 1 (Total results: 50)" in obs and "click[next >]" in info["admissible_actions"]
    assert "click[< prev]" not in info["admissible_actions"]
    first = [a for a in info["admissible_actions"] if a.startswith("click[b0")]
    assert len(first) == 10
    for page in range(2, 6):
        obs, _, _, _, info = env.step("click[next >]")
        assert f"Page {page} (Total results: 50)" in obs and "click[< prev]" in info["admissible_actions"]
    assert "click[next >]" not in info["admissible_actions"]
    _, _, _, _, info = env.step("click[next >]")
    assert not info["action_valid"]
    for _ in range(4):
        obs, _, _, _, info = env.step("click[< prev]")
    assert "Page 1 " in obs and [a for a in info["admissible_actions"] if a.startswith("click[b0")] == first
    _, _, _, _, info = env.step(first[3])
    obs, _, _, _, info = env.step("click[< prev]")  # item -> the results page it came from
    assert info["page"] == "results" and "Page 1 " in obs


def test_invalid_actions_are_reported_not_raised():
    env = _env()
    obs0, _ = env.reset(options={"task_id": "webshop-test-0000"})
    for bad in ["", "buy the perfume", "click[buy now]", "search[]", "search[<your query>]", "click[", None]:
        obs, r, term, trunc, info = env.step(bad)
        assert not info["action_valid"] and r == 0.0 and not term
        assert obs.startswith("Invalid action: ") and obs.endswith(obs0)
    env.step("search[perfume]")
    _, _, _, _, info = env.step("search[cologne]")  # no search bar on the results page
    assert not info["action_valid"] and info["page"] == "results"
    _, _, _, _, info = env.step("click[description]")
    assert not info["action_valid"]


def test_zero_results_page():
    env = _env()
    env.reset(options={"task_id": "webshop-test-0000"})
    obs, _, _, _, info = env.step("search[qwertyuiop zzzz]")
    assert "Total results: 0" in obs and info["admissible_actions"] == ["click[back to search]"]


def test_step_cap_truncates():
    env = _env(max_steps=3)
    env.reset(options={"task_id": "webshop-test-0000"})
    for i in range(3):
        _, _, term, trunc, info = env.step("click[nothing]")
        assert not term and trunc == (i == 2) and info["step"] == i + 1


def test_step_after_done_is_invalid():
    env = _env()
    _, info = env.reset(options={"task_id": "webshop-test-0002"})
    for a in info["expert_actions"]:
        env.step(a)
    obs, r, term, trunc, info = env.step("click[buy now]")
    assert not info["action_valid"] and r == 0.0 and info["admissible_actions"] == []


def test_unknown_task_and_split():
    with pytest.raises(ValueError, match="split"):
        envs.make("webshop", split="nope")
    with pytest.raises(ValueError, match="task_id"):
        _env().reset(options={"task_id": "webshop-test-9999"})


def test_reset_without_task_id_draws_from_split():
    env = envs.make("webshop", split="train")
    _, info = env.reset(seed=3)
    assert info["task_id"].startswith("webshop-train-")


# ---- expert -----------------------------------------------------------------------------
def _run_expert(env, task_id):
    obs, info = env.reset(options={"task_id": task_id})
    plan = info["expert_actions"]
    term = trunc = False
    while not (term or trunc):
        obs, r, term, trunc, info = env.step(info["expert_actions"][0])
    return info, r, len(plan)


@pytest.mark.parametrize("panel", ["webshop/smoke@v1"])
def test_expert_wins_every_smoke_task(panel):
    from envs.panels import get_panel
    p = get_panel(panel)
    env = envs.make("webshop", split=p.split, **p.env_kwargs)
    for tid in p.task_ids:
        info, r, n = _run_expert(env, tid)
        assert info["won"] and r == SUCCESS_REWARD and info["step"] == n, tid


def test_expert_wins_sample_of_test_and_train():
    w = build_world(0)
    env = _env()
    for tid in w.splits["test"][::3] + w.splits["train"][::40]:
        info, r, _ = _run_expert(env, tid)
        assert info["won"], tid


def test_expert_recovers_from_random_detours():
    rng = random.Random(0)
    env = _env(max_steps=60)
    for tid in build_world(0).splits["test"][:40]:
        _, info = env.reset(options={"task_id": tid})
        for _ in range(rng.randrange(1, 6)):  # wander: random admissible clicks / a search
            acts = [a for a in info["admissible_actions"] if a != "click[buy now]"] or ["click[x]"]
            a = rng.choice(acts).replace("<your query>", rng.choice(["black", "gluten free", "mat"]))
            _, _, _, _, info = env.step(a)
        plan = info["expert_actions"]
        term = False
        while not term:
            before = len(info["expert_actions"])
            _, _, term, _, info = env.step(info["expert_actions"][0])
            assert term or len(info["expert_actions"]) == before - 1  # plans are consistent
        assert info["won"], (tid, plan)


def test_expert_falls_back_to_title_search():
    from dataclasses import replace

    from envs.webshop.env import expert_plan, get_engine
    from envs.webshop.pages import PageState
    w = build_world(0)
    g = replace(w.goals["webshop-test-0000"], query="qwertyuiop")  # key words that find nothing
    plan = expert_plan(PageState(), g, get_engine(0), w.by_asin)
    assert plan[0] == f"search[{w.by_asin[g.asin].title.lower()}]" and plan[-1] == "click[buy now]"
    assert f"click[{g.asin.lower()}]" in plan


# ---- determinism --------------------------------------------------------------------------
def test_same_task_same_pages():
    def trace(env):
        obs, info = env.reset(options={"task_id": "webshop-test-0042"})
        out = [obs]
        for a in ["search[long lasting]", "click[next >]", "click[back to search]"] + info["expert_actions"]:
            out.append(env.step(a)[0])
        return out

    assert trace(_env()) == trace(_env())
