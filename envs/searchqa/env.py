"""opid/SearchQA-v0: Search-R1-style question answering with a retriever behind HTTP.

One episode = one question. Each turn the agent emits `<search>query</search>` (the env replies
with the top-k passages exactly as Search-R1 appends them, "\n\n<information>Doc 1(Title: "T") ...
</information>\n\n", so Search-R1-trained models see their own format) or `<answer>text</answer>`
(the episode ends; reward = exact match in {0, 1}, as in the reference). At most 4 turns, then
truncation. A retriever that fails raises RetrieverError naming its URL; the env runner counts it
as an env fault, ends that episode and goes on.

Retrieval (why three modes): the default starts one built-in bm25s server per process on
127.0.0.1 and talks to it over the real Search-R1 HTTP API, so training exercises the same path
as with a user's e5/FAISS wiki-18 server (`retriever_url="http://host:8000/retrieve"`);
`retriever="local"` skips HTTP for speed in tests and benchmarks.
"""

from __future__ import annotations

from typing import Any, Sequence

from envs.base import TextEnv, setting

from .client import LocalRetriever, RetrieverClient, format_information
from .corpus import Question, build_world
from .reward import exact_match, parse_action

ADMISSIBLE = ["<search>...</search>", "<answer>...</answer>"]
INVALID_HINT = "Respond with exactly one <search>query</search> or <answer>text</answer> block."


class SearchQAEnv(TextEnv):
    """Search-R1 protocol over the synthetic world (splits "train"/"test") or a user's data_file.

    kwargs: topk (passages per search, 3), retriever ("http" | "local" | an object with
    `search(queries, topk)`), retriever_url (None = built-in server), data_file (Search-R1
    parquet/jsonl; replaces the synthetic questions, all rows form the split), corpus_file
    (Search-R1 jsonl corpus for the built-in BM25 index), timeout (seconds per HTTP request).
    """

    env_name = "searchqa"
    default_max_steps = 4

    def __init__(self, split: str = "train", max_steps: int | None = None, *, topk: int = 3,
                 retriever: Any = "http", retriever_url: str | None = None, data_file: str | None = None,
                 corpus_file: str | None = None, timeout: float = 30.0, **kwargs: Any):
        super().__init__(split=split, max_steps=max_steps, **kwargs)
        self.topk = setting("topk", topk, int)
        if self.topk < 1:
            raise ValueError(f"topk={topk}: must be >= 1")
        if data_file:
            from .loaders import load_questions

            questions = load_questions(data_file)
        else:
            world = build_world()
            if split not in world.questions:
                raise ValueError(f"split={split!r}: unknown; choose one of {sorted(world.questions)} "
                                 "(or pass data_file=...)")
            questions = world.questions[split]
        self._questions: dict[str, Question] = {q.task_id: q for q in questions}
        self._ids = tuple(self._questions)
        if retriever == "local" and retriever_url:
            raise ValueError("retriever='local' and retriever_url are exclusive")
        if isinstance(retriever, str) and retriever not in ("http", "local"):
            raise ValueError(f"retriever={retriever!r}: choose 'http', 'local' or pass a client object")
        self._retriever_spec, self._retriever_url = retriever, retriever_url
        self._corpus_file, self._timeout = corpus_file, setting("timeout", timeout, float)
        self._retriever = None if isinstance(retriever, str) else retriever
        self._q: Question | None = None
        self._retrieved: list[str] = []
        self._searches = 0
        self._done = False
        self._won = False

    # ---- retrieval ----------------------------------------------------------------------
    @property
    def retriever(self):
        """Created on first use, so listing tasks never starts a server."""
        if self._retriever is None:
            from .retriever_server import builtin_server_url, shared_index

            if self._retriever_spec == "local":
                self._retriever = LocalRetriever(shared_index(self._corpus_file), topk=self.topk)
            else:
                url = self._retriever_url or builtin_server_url(self._corpus_file)
                self._retriever = RetrieverClient(url, timeout=self._timeout, topk=self.topk)
        return self._retriever

    # ---- TextEnv API --------------------------------------------------------------------
    def task_ids(self) -> Sequence[str]:
        return self._ids

    def question(self, task_id: str) -> Question:
        if task_id not in self._questions:
            raise KeyError(f"task_id={task_id!r}: not in searchqa split {self.split!r}")
        return self._questions[task_id]

    def _reset_task(self, task_id: str) -> tuple[str, dict[str, Any]]:
        self._q = self.question(task_id)
        self._retrieved, self._searches, self._done, self._won = [], 0, False, False
        return f"Question: {self._q.question}", self._info()

    def _step_task(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        if self._done:
            return "The episode is over.", 0.0, True, self._info(action_valid=False)
        act = parse_action(action)
        if not act.valid:
            return f"Invalid action: {act.reason}. {INVALID_HINT}", 0.0, False, self._info(action_valid=False)
        if act.kind == "search":
            hits = self.retriever.search([act.content], self.topk)[0]
            self._searches += 1
            for h in hits:
                if h.title not in self._retrieved:
                    self._retrieved.append(h.title)
            return format_information(hits), 0.0, False, self._info()
        reward = exact_match(act.content, self._q.answers)
        self._done, self._won = True, reward == 1.0
        return f"Answer submitted: {act.content}", reward, True, self._info()

    # ---- info ---------------------------------------------------------------------------
    def expert_actions(self) -> list[str]:
        """Gold plan from now: searches for supporting passages not yet retrieved, then the answer.

        For data files (no supporting passages known) the plan is: search the question once, answer.
        """
        q = self._q
        plan = [f"<search>{query}</search>" for title, query in zip(q.support_titles, q.expert_queries)
                if title not in self._retrieved]
        if not q.support_titles and self._searches == 0:
            plan.append(f"<search>{q.question}</search>")
        return plan + [f"<answer>{q.answers[0]}</answer>"]

    def _info(self, action_valid: bool = True) -> dict[str, Any]:
        q = self._q
        return {
            "task": q.question,
            "task_type": q.task_type,
            "admissible_actions": list(ADMISSIBLE),
            "won": self._won,
            "action_valid": action_valid,
            "expert_actions": [] if self._done else self.expert_actions(),
            "retrieved_titles": list(self._retrieved),
            "ground_truth": {"answers": list(q.answers), "supporting_titles": list(q.support_titles),
                             "template": q.template},
        }

    def close(self) -> None:
        """Closes this env's connection; the shared built-in server lives on for other envs."""
        if self._retriever is not None and isinstance(self._retriever_spec, str):
            self._retriever.close()
        super().close()
