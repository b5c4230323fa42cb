"""WebShop server client: page parsing and request building on hand-written HTML, unreachable servers."""

import socket
import time
from pathlib import Path

import pytest

import envs
from envs.webshop.client import WebShopClient, WebShopServerError, parse_page

DATA = Path(__file__).parent / "data" / "webshop"
BASE = "http://shop.test:3000"
INSTR = "i need a long lasting womens perfume, and price lower than 40.00 dollars"


def _page(name):
    return (DATA / f"{name}.html").read_text()


class FakeServer:
    """Transport that records requests and answers like the Flask app (POST search -> results)."""

    def __init__(self):
        self.requests = []

    def __call__(self, method, url, data, timeout):
        self.requests.append((method, url, data))
        path = url[len(BASE):]
        if path == "/fixed_7" and method == "GET":
            return url, _page("search")
        if path == "/fixed_7" and data and "search_query" in data:
            return f"{BASE}/search_results/fixed_7/x/1", _page("results")
        for prefix, name in [("/search_results/", "results"), ("/item_page/", "item"),
                             ("/item_sub_page/", "item"), ("/done/", "done"), ("/fixed_7", "search")]:
            if path.startswith(prefix):
                return url, _page(name)
        raise AssertionError(f"unexpected request {method} {url}")


def test_parse_search_page():
    p = parse_page(_page("search"), f"{BASE}/fixed_7")
    assert p.text == f"WebShop [SEP] Instruction: [SEP] {INSTR} [SEP] Search"
    assert p.instruction == INSTR and p.search_url == f"{BASE}/fixed_7" and p.kind == "search"
    assert p.clickables == {} and p.admissible_actions() == ["search[<your query>]"]


def test_parse_results_page():
    p = parse_page(_page("results"), f"{BASE}/search_results/fixed_7/x/2")
    assert p.kind == "results" and p.instruction == INSTR
    assert list(p.clickables) == ["back to search", "< prev", "next >", "b07abc1234", "b08xyz9876"]
    assert p.clickables["b07abc1234"] == ("GET", f"{BASE}/item_page/fixed_7/B07ABC1234/%5B%27long%27%5D/2/%7B%7D")
    assert p.clickables["next >"][0] == "POST" and p.clickables["next >"][1].endswith("/3")
    assert "Page 2 (Total results: 50) [SEP] < Prev [SEP] Next > [SEP] B07ABC1234 [SEP] Lumora" in p.text


def test_parse_item_and_done_pages():
    item = parse_page(_page("item"), f"{BASE}/item_page/fixed_7/B07ABC1234/x/2/%7B%7D")
    assert item.kind == "item"
    assert list(item.clickables) == ["back to search", "< prev", "1.7 fl oz", "3.4 fl oz", "description",
                                     "features", "buy now"]
    assert item.clickables["3.4 fl oz"][1].startswith(f"{BASE}/item_page/fixed_7/B07ABC1234/")
    assert item.clickables["buy now"] == ("POST", f"{BASE}/done/fixed_7/B07ABC1234/%7B%7D")
    assert "size [SEP] 1.7 fl oz [SEP] 3.4 fl oz [SEP] Lumora" in item.text
    done = parse_page(_page("done"), f"{BASE}/done/fixed_7/B07ABC1234/%7B%7D")
    assert done.kind == "done" and done.score == 0.75 and done.clickables == {}
    assert "B07ABC1234" not in done.text and "r_type" not in done.text  # hidden parts skipped


def test_client_builds_requests():
    fake = FakeServer()
    c = WebShopClient(BASE + "/", transport=fake)
    c.reset("fixed_7")
    page, err = c.step("search[Long Lasting  Perfume]")
    assert err is None and page.kind == "results"
    page, err = c.step("click[B07ABC1234]")
    assert err is None and page.kind == "item"
    page, err = c.step("click[3.4 fl oz]")
    page, err = c.step("click[buy now]")
    assert page.score == 0.75 and c.instruction == INSTR
    assert fake.requests[0] == ("GET", f"{BASE}/fixed_7", None)
    assert fake.requests[1] == ("POST", f"{BASE}/fixed_7", {"search_query": "long lasting perfume"})
    assert fake.requests[2][0] == "GET" and "/item_page/fixed_7/B07ABC1234/" in fake.requests[2][1]
    assert fake.requests[3][0] == "GET" and "3.4%20fl%20oz" in fake.requests[3][1]
    assert fake.requests[4] == ("POST", f"{BASE}/done/fixed_7/B07ABC1234/%7B%7D", {})


def test_client_rejects_invalid_actions_without_requests():
    fake = FakeServer()
    c = WebShopClient(BASE, transport=fake)
    c.reset("fixed_7")
    for bad in ["hello", "click[buy now]", "search[]"]:
        page, err = c.step(bad)
        assert err and page.kind == "search"
    c.step("search[perfume]")
    assert c.step("search[again]")[1] and len(fake.requests) == 2


def test_env_over_fake_server():
    env = envs.make("webshop", split="test", server_url=BASE)
    assert env.task_ids()[:2] == ["fixed_0", "fixed_1"] and len(env.task_ids()) == 500
    env._client.transport = FakeServer()
    obs, info = env.reset(options={"task_id": "fixed_7"})
    assert obs.startswith("WebShop [SEP] Instruction:") and info["task"] == INSTR
    obs, r, term, _, info = env.step("search[perfume]")
    assert info["page"] == "results" and "click[b07abc1234]" in info["admissible_actions"]
    _, _, _, _, info = env.step("click[nope]")
    assert not info["action_valid"]
    env.step("click[b07abc1234]")
    obs, r, term, _, info = env.step("click[buy now]")
    assert term and r == 0.0 and info["score"] == 0.75 and not info["won"]


def _closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_unreachable_server_raises_clearly():
    env = envs.make("webshop", split="test", server_url=f"http://127.0.0.1:{_closed_port()}", server_timeout=2)
    with pytest.raises(WebShopServerError, match="unreachable"):
        env.reset(options={"task_id": "fixed_0"})


def test_silent_server_times_out():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)  # accepts the TCP handshake, never answers
    try:
        c = WebShopClient(f"http://127.0.0.1:{listener.getsockname()[1]}", timeout=0.3)
        t = time.monotonic()
        with pytest.raises(WebShopServerError, match="unreachable"):
            c.reset("fixed_0")
        assert time.monotonic() - t < 3
    finally:
        listener.close()
