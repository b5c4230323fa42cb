"""HTTP client for a running WebShop server (the original Flask app, `python -m web_agent_site.app`).

Why: to evaluate on the real 1000-product / 1.18M-product WebShop when one is running, with the same
observation text and action grammar as the offline env. The client keeps the current page, parses it
into simple-mode text ("a [SEP] b [SEP] ...") and a map clickable -> request, and turns
`search[q]` / `click[x]` into the HTTP request the browser would send:
  search bar (input#search_input)     POST <form action> search_query=q  (the app redirects to results)
  button (Back to Search, Next >, ...) POST <enclosing form action>
  product link (a.product-link)       GET href
  option radio (input[type=radio])    GET data-url
Sessions: GET <server>/<session_id>; "fixed_<i>" selects goal i. Stdlib only (urllib, html.parser);
every request has a timeout and failures raise WebShopServerError (never hang).
"""

from __future__ import annotations

import re
import socket
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Callable

SEP = " [SEP] "
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}
HIDDEN = {"head", "script", "style", "title", "template", "noscript"}
_ACTION = re.compile(r"^\s*(search|click)\s*\[(.*)\]\s*$", re.IGNORECASE | re.DOTALL)
_FLOAT = re.compile(r"-?\d+(?:\.\d+)?")

# transport(method, url, form_data_or_None, timeout) -> (final_url, html)
Transport = Callable[[str, str, "dict | None", float], "tuple[str, str]"]


class WebShopServerError(ConnectionError):
    """The WebShop server could not be reached or answered with an error."""


@dataclass
class ServerPage:
    url: str
    text: str
    clickables: dict[str, tuple[str, str]] = field(default_factory=dict)  # lower text -> (method, url)
    search_url: str | None = None  # set when the page has a search bar
    instruction: str = ""
    score: float | None = None  # set on the "done" page

    @property
    def kind(self) -> str:
        if self.score is not None:
            return "done"
        if self.search_url:
            return "search"
        if "buy now" in self.clickables:
            return "item"
        if any("/item_page/" in u for _, u in self.clickables.values()):
            return "results"
        return "page"

    def admissible_actions(self) -> list[str]:
        head = ["search[<your query>]"] if self.search_url else []
        return head + [f"click[{c}]" for c in self.clickables]


class _PageParser(HTMLParser):
    def __init__(self, base_url: str):
        super().__init__(convert_charrefs=True)
        self.base = base_url
        self.stack: list[tuple[str, dict]] = []
        self.forms: list[tuple[str, str]] = []  # (method, absolute action)
        self.texts: list[str] = []
        self.clickables: dict[str, tuple[str, str]] = {}
        self.search_url: str | None = None
        self.instruction: list[str] = []
        self.reward: list[str] = []
        self._button: list[str] | None = None
        self._link: tuple[str, list[str]] | None = None

    def _inside(self, pred) -> bool:
        return any(pred(tag, attrs) for tag, attrs in self.stack)

    def _hidden(self) -> bool:
        return self._inside(lambda t, a: t in HIDDEN or "display:none" in (a.get("style") or "").replace(" ", "")
                            or "hidden" in a)

    def handle_starttag(self, tag, attrs_list):
        attrs = {k: (v if v is not None else "") for k, v in attrs_list}
        url = lambda u: urllib.parse.urljoin(self.base, u)  # noqa: E731
        if tag == "form":
            self.forms.append(((attrs.get("method") or "get").upper(), url(attrs.get("action") or self.base)))
        elif tag == "input" and attrs.get("id") == "search_input" and self.forms:
            self.search_url = self.forms[-1][1]
        elif tag == "input" and attrs.get("type") == "radio" and attrs.get("value"):
            self.clickables[attrs["value"].strip().lower()] = ("GET", url(attrs.get("data-url", "")))
        elif tag == "button":
            self._button = []
        elif tag == "a" and "product-link" in (attrs.get("class") or "").split():
            self._link = (url(attrs.get("href", "")), [])
        if tag not in VOID:
            self.stack.append((tag, attrs))

    def handle_endtag(self, tag):
        if tag == "form" and self.forms:
            self.forms.pop()
        elif tag == "button" and self._button is not None:
            label = " ".join("".join(self._button).split()).lower()
            if label and not (label == "search" and self.search_url):
                method, action = self.forms[-1] if self.forms else ("GET", self.base)
                self.clickables[label] = (method, action)
            self._button = None
        elif tag == "a" and self._link is not None:
            self.clickables[" ".join("".join(self._link[1]).split()).lower()] = ("GET", self._link[0])
            self._link = None
        for i in range(len(self.stack) - 1, -1, -1):  # tolerate unclosed / mis-nested tags
            if self.stack[i][0] == tag:
                del self.stack[i:]
                break

    def handle_data(self, data):
        if self._button is not None:
            self._button.append(data)
        if self._link is not None:
            self._link[1].append(data)
        if self._inside(lambda t, a: a.get("id") == "reward"):
            self.reward.append(data)
        if self._hidden():
            return
        if self._inside(lambda t, a: a.get("id") == "instruction-text"):
            self.instruction.append(data)
        text = data.strip()
        if text:
            self.texts.append(text)


def parse_page(html: str, url: str) -> ServerPage:
    """HTML of a WebShop page -> ServerPage (simple-mode text, clickables, search bar, score)."""
    p = _PageParser(url)
    p.feed(html)
    p.close()
    instr = " ".join(" ".join(p.instruction).split())
    instr = re.sub(r"^Instruction:\s*", "", instr).split(" Current Query:")[0].strip()
    score = None
    found = _FLOAT.findall(" ".join(p.reward).split(")", 1)[-1]) if p.reward else []
    if found:
        score = float(found[0])
    return ServerPage(url=url, text=SEP.join(p.texts), clickables=p.clickables, search_url=p.search_url,
                      instruction=instr, score=score)


def urllib_transport(method: str, url: str, data: dict | None, timeout: float) -> tuple[str, str]:
    body = urllib.parse.urlencode(data).encode() if data is not None else (b"" if method == "POST" else None)
    req = urllib.request.Request(url, data=body, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.geturl(), resp.read().decode("utf-8", errors="replace")
    except urllib.error.HTTPError as e:
        raise WebShopServerError(f"WebShop server answered HTTP {e.code} for {method} {url}") from e
    except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise WebShopServerError(
            f"WebShop server unreachable at {url} ({reason}); start it (python -m web_agent_site.app) "
            f"or use the offline env (server_url=None)") from e


class WebShopClient:
    """One browsing session on a WebShop server; `page` is the current page."""

    def __init__(self, server_url: str, timeout: float = 10.0, transport: Transport | None = None):
        self.base = server_url.rstrip("/")
        self.timeout = float(timeout)
        self.transport = transport or urllib_transport
        self.page = ServerPage(url=self.base, text="")
        self.instruction = ""

    def _go(self, method: str, url: str, data: dict | None = None) -> ServerPage:
        final_url, html = self.transport(method, url, data, self.timeout)
        self.page = parse_page(html, final_url or url)
        if self.page.instruction:
            self.instruction = self.page.instruction
        return self.page

    def reset(self, session_id: str) -> ServerPage:
        self.instruction = ""
        return self._go("GET", f"{self.base}/{urllib.parse.quote(str(session_id))}")

    def step(self, action: str) -> tuple[ServerPage, str | None]:
        """Execute `search[q]` / `click[x]`. Returns (page, None) or (unchanged page, why invalid)."""
        m = _ACTION.match(action or "")
        if not m:
            return self.page, "actions look like search[keywords] or click[button]"
        kind, arg = m.group(1).lower(), " ".join(m.group(2).split()).lower()
        if kind == "search":
            if not self.page.search_url:
                return self.page, "there is no search bar on this page; click[back to search] first"
            if not arg or arg == "<your query>":
                return self.page, "search[...] needs keywords"
            return self._go("POST", self.page.search_url, {"search_query": arg}), None
        if arg not in self.page.clickables:
            return self.page, f"'{arg}' is not clickable on this page"
        method, url = self.page.clickables[arg]
        return self._go(method, url, {} if method == "POST" else None), None
