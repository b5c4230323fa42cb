"""An OpenAI-compatible analyzer's key and server, checked in the driver before Ray starts.

Why: with `--analyzer openai` and no OPENAI_API_KEY, the run found out only in an env runner, after about 50 s of
rollouts, as a 40-line traceback; an unreachable server would fail every request of the run the same way. Here each
is one line in a second or two. The key is never printed (only the name of its variable), nor a URL's user or query.
"""

from __future__ import annotations

import os
import socket
import urllib.error
import urllib.parse
import urllib.request
from typing import Mapping

OPENAI_LIKE = ("openai", "azure")
PROBE_TIMEOUT_S = 3.0


def analyzer_setup_error(analyzer: str, options: Mapping | None, environ: Mapping[str, str] | None = None,
                         timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """One line naming what an openai/azure analyzer lacks (key, base URL) or a base URL that does not answer;
    None when it is set up, or for another analyzer. Reads the same settings as OpenAIAnalyzer."""
    if analyzer not in OPENAI_LIKE:
        return None
    environ = os.environ if environ is None else environ
    options = dict(options or {})
    key_env = options.get("api_key_env") or "OPENAI_API_KEY"
    url = options.get("base_url") or environ.get("OPENAI_BASE_URL") or None
    where = "--analyzer-option base_url" if options.get("base_url") else "OPENAI_BASE_URL"
    has_key = bool(options.get("api_key") or environ.get(key_env))
    if analyzer == "azure" and not url:
        return ("--analyzer azure: no base URL; set OPENAI_BASE_URL (or --analyzer-option base_url=URL) to your "
                "resource's endpoint, e.g. https://NAME.openai.azure.com/openai/v1")
    if not has_key and (analyzer == "azure" or not url):
        local = "" if analyzer == "azure" else " (or OPENAI_BASE_URL for a local server that needs none)"
        return f"--analyzer {analyzer}: no API key; {key_env} is not set: export it{local}"
    if url:
        problem = probe(url, timeout_s)
        if problem:
            return (f"--analyzer {analyzer}: base URL {shown_url(url)} ({where}) does not answer: {problem}; start "
                    "the server or fix the URL")
    return None


def probe(url: str, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """One GET of `url`/models without credentials: None if any HTTP answer came back (401 and 404 included: a
    server is there), else why not, in a few words."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "not an http(s) URL"
    target = shown_url(url).rstrip("/") + "/models"  # no user, password or query: nothing secret is sent
    try:
        with urllib.request.urlopen(urllib.request.Request(target, method="GET"), timeout=timeout_s):
            return None
    except urllib.error.HTTPError:
        return None
    except urllib.error.URLError as e:
        return _reason(e.reason, timeout_s)
    except (OSError, ValueError) as e:  # a timeout while reading, a malformed port
        return _reason(e, timeout_s)


def _reason(err, timeout_s: float) -> str:
    if isinstance(err, (socket.timeout, TimeoutError)):
        return f"no answer within {timeout_s:g} s"
    if isinstance(err, ConnectionRefusedError):
        return "connection refused"
    if isinstance(err, socket.gaierror):
        return "unknown host"
    return " ".join(str(err).split())[:200]


def shown_url(url: str) -> str:
    """The URL without user, password or query (where tokens sometimes ride)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    try:
        netloc = f"{host}:{parts.port}" if parts.port else host
    except ValueError:  # a malformed port: shown as the host alone
        netloc = host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))
