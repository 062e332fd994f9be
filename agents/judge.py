"""LLM judges as the field runs them: a model served with ``vllm serve`` or SGLang and called over
the OpenAI API, a verdict cache that makes a re-scoring free and reproducible, and the replay of a
verdicts file.

A judge is any callable ``(question, reference, candidate) -> reply`` (the reply is the judge's
raw text; the caller reads it, e.g. V-STaR's ``int()``). This module knows no benchmark: the
prompt (system prompt and a user template with three ``{}`` for question, reference, candidate)
comes from the caller, so a benchmark metric and a judged training reward can share it.

- `OpenAIJudge(url, model, system_prompt, template)`: chat completions at ``url`` (``.../v1``)
  through `agents.openai_client` (retries with backoff, the API key from the environment; the
  same client the served policy `openai:` uses), temperature 0, so a served judge answers the
  same text each time. Without a model name it takes the first one ``/v1/models`` lists. The
  server is contacted on the first call only.
- `CachedJudge(judge, path, name)`: every verdict is one line of the JSONL file `path`,
  ``{"question", "reference", "candidate", "reply", "judge"}``; the cache key is the exact
  (question, reference, candidate) triple (no normalisation). A triple already in the file is not
  asked again, so a re-run with the server stopped costs nothing and gives the same numbers.
  A line written by another judge (its ``judge`` differs from `name`: the model a spec names, else
  its URL) is not reused.
- `ReplayJudge(path)` (``file:VERDICTS.jsonl``): the verdicts of such a file, no model at all; a
  triple it has no verdict for is an error.

`judge_from_spec` reads ``openai:URL[#MODEL]``, ``file:PATH``, ``hf:PATH`` and ``vllm:PATH``. Every error a user can cause
(a bad spec, an unreachable server, a malformed verdicts file) is a `JudgeError`, one line.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

Triple = tuple[str, str, str]
Judge = Callable[[str, str, str], Any]
FIELDS = ("question", "reference", "candidate", "reply")


class JudgeError(ValueError):
    """A judge that cannot be built or reached, or a verdicts file that cannot be read (one line)."""


def parse_spec(spec: str) -> tuple[str, str, str | None]:
    """``(kind, target, model)`` of a judge spec: ``openai:URL[#MODEL]`` or ``file:PATH``.

    >>> parse_spec("openai:http://127.0.0.1:8000/v1#Qwen/Qwen2.5-72B-Instruct")
    ('openai', 'http://127.0.0.1:8000/v1', 'Qwen/Qwen2.5-72B-Instruct')
    >>> parse_spec("file:runs/vstar/verdicts.jsonl")
    ('file', 'runs/vstar/verdicts.jsonl', None)
    """
    kind, sep, rest = spec.partition(":")
    if kind == "file" and sep and rest:
        return "file", rest, None
    if kind == "openai" and sep:
        url, _, model = rest.partition("#")
        if url.startswith(("http://", "https://")) and len(url.split("://", 1)[1].strip("/")) > 0:
            return "openai", url, model or None
        raise JudgeError(f"--judge {spec!r}: expected openai:http(s)://HOST:PORT/v1[#MODEL]")
    raise JudgeError(f"--judge {spec!r}: expected openai:URL[#MODEL], file:VERDICTS.jsonl, hf:PATH or vllm:PATH")


class OpenAIJudge:
    """A judge served over the OpenAI chat API (``vllm serve``, SGLang, any compatible server).

    ``reply = chat([system_prompt, template.format(question, reference, candidate)])`` at
    temperature 0 with at most `max_tokens` new tokens, through the client the served policy uses
    too (`agents.openai_client`): `max_retries` tries more after the first on 429s, 5xx answers,
    connection errors and timeouts (`timeout` seconds each), with backoff. A server that cannot
    be reached after them, or answers an error, is a `JudgeError`. The API key is read from the
    environment variable `api_key_env` (``$OPENAI_API_KEY``) at each request; a local server
    started without ``--api-key`` checks none.
    """

    def __init__(self, url: str, model: str | None, system_prompt: str, template: str, *, max_tokens: int = 512,
                 timeout: float = 120.0, max_retries: int = 2, api_key_env: str = "OPENAI_API_KEY", backoff: float = 0.5) -> None:
        from videoseek.agents.openai_client import Endpoint

        self.url, self.model = url, model
        self.system_prompt, self.template, self.max_tokens = system_prompt, template, max_tokens
        self.endpoint = Endpoint(url.rstrip("/"), model, api_key_env=api_key_env, timeout=timeout, retries=max_retries, backoff=backoff)
        self._client: Any = None
        self._lock = threading.Lock()  # calls come from several threads (`CachedJudge.many`)

    def _connect(self) -> Any:
        with self._lock:
            if self._client is None:
                from videoseek.agents.openai_client import OpenAIClient, OpenAIError

                try:
                    client = OpenAIClient(self.endpoint, concurrency=16)
                except OpenAIError as exc:
                    raise JudgeError(f"--judge openai: {exc}") from None
                self._client = client
                if self.model is None:
                    self.model = self._call(client.resolve_model)
            return self._client

    def _call(self, fn: Callable[[], Any]) -> Any:
        from videoseek.agents.openai_client import OpenAIError, ServerRefused

        try:
            return fn()
        except ServerRefused as exc:
            raise JudgeError(f"--judge openai:{self.url}: the server answered {exc.status} ({exc.detail})") from None
        except OpenAIError as exc:  # no answer: refused connection, timeout, not JSON
            raise JudgeError(f"--judge openai:{self.url}: cannot reach the judge server ({exc.detail})") from None

    def __call__(self, question: str, reference: str, candidate: str) -> str:
        client = self._connect()
        messages = [{"role": "system", "content": self.system_prompt},
                    {"role": "user", "content": self.template.format(question, reference, candidate)}]
        body = {"model": self.model, "messages": messages, "temperature": 0.0, "max_tokens": self.max_tokens}
        out = self._call(lambda: client.post("/chat/completions", body))
        choices = out.get("choices") or []
        if not choices or not isinstance(choices[0], dict):
            raise JudgeError(f"--judge openai:{self.url}: the server answered with no choice")
        return (choices[0].get("message") or {}).get("content") or ""


def read_verdicts(path: Path) -> list[dict[str, Any]]:
    """The lines of a verdicts file; `JudgeError` ``FILE:LINE: ...`` for a malformed one."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise JudgeError(f"{path}: cannot read the verdicts file ({exc.strerror or exc})") from None
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            raise JudgeError(f"{path}:{n}: not a JSON object") from None
        if not isinstance(row, dict):
            raise JudgeError(f"{path}:{n}: not a JSON object")
        for field in FIELDS:
            if not isinstance(row.get(field), str):
                raise JudgeError(f"{path}:{n}: field '{field}': expected a string, got {row.get(field)!r}")
        rows.append(row)
    return rows


def _key(row: dict[str, Any]) -> Triple:
    return (row["question"], row["reference"], row["candidate"])


class CachedJudge:
    """`judge` behind the verdict file `path` (see the module docstring); `name` identifies the
    judge in each line; `workers` verdicts are asked at a time. `asked` / `reused` count this
    object's verdicts of each kind."""

    def __init__(self, judge: Judge, path: Path, name: str, workers: int = 16) -> None:
        self.judge, self.path, self.name, self.workers = judge, Path(path), name, workers
        self.verdicts: dict[Triple, str] = {}
        if self.path.is_file():
            for row in read_verdicts(self.path):
                if row.get("judge") == name:
                    self.verdicts[_key(row)] = row["reply"]
        self.asked = self.reused = 0

    def _store(self, triple: Triple, reply: str) -> None:
        self.verdicts[triple] = reply
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(dict(zip(FIELDS, (*triple, reply)), judge=self.name), ensure_ascii=False) + "\n")

    def __call__(self, question: str, reference: str, candidate: str) -> str:
        return self.many([(question, reference, candidate)])[0]

    def many(self, triples: Sequence[Triple]) -> list[str]:
        """The replies of `triples`, in order; those not in the file asked concurrently (`workers`
        requests in flight, so a vLLM / SGLang server batches them) and appended to it."""
        workers = self.workers
        triples = [tuple(str(x) for x in t) for t in triples]
        missing = list(dict.fromkeys(t for t in triples if t not in self.verdicts))
        self.reused += len(triples) - len(missing)  # served without a request (from the file, or a repeat)
        if missing:
            with ThreadPoolExecutor(max_workers=max(1, min(workers, len(missing)))) as pool:
                for triple, reply in zip(missing, pool.map(lambda t: str(self.judge(*t)), missing)):
                    self._store(triple, reply)
                    self.asked += 1
        return [self.verdicts[t] for t in triples]

    def summary(self) -> dict[str, Any]:
        return {"file": str(self.path), "asked": self.asked, "reused": self.reused}


class ReplayJudge:
    """``file:VERDICTS.jsonl``: the replies a verdicts file holds (the last line of a triple wins)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        rows = read_verdicts(self.path)
        self.verdicts: dict[Triple, str] = {_key(r): r["reply"] for r in rows}
        self.judges = sorted({str(r.get("judge")) for r in rows if r.get("judge")})
        self.reused = 0

    def __call__(self, question: str, reference: str, candidate: str) -> str:
        return self.many([(question, reference, candidate)])[0]

    def many(self, triples: Iterable[Triple]) -> list[str]:
        out = []
        for t in triples:
            t = tuple(str(x) for x in t)
            if t not in self.verdicts:
                raise JudgeError(f"{self.path}: no verdict for the candidate {t[2][:60]!r} to the question {t[0][:60]!r}")
            out.append(self.verdicts[t])
        self.reused += len(out)
        return out

    def summary(self) -> dict[str, Any]:
        return {"file": str(self.path), "asked": 0, "reused": self.reused, "judged_by": self.judges}


def judge_from_spec(spec: str, system_prompt: str, template: str, cache: Path | None = None,
                    **client_args: Any) -> Callable[[str, str, str], str]:
    """The judge of ``openai:URL[#MODEL]`` (behind a `CachedJudge` at `cache` when given, named
    ``openai:MODEL``, or ``openai:URL`` without a model), ``file:PATH`` (a `ReplayJudge`), or
    ``hf:PATH`` / ``vllm:PATH`` (`local_judge`, the model loaded now; behind a `CachedJudge`
    named by the spec). `client_args` go to `OpenAIJudge` (``max_tokens`` to a local judge too)."""
    kind, _, path = spec.partition(":")
    if kind in ("hf", "vllm") and path:
        judge = local_judge(kind, path, system_prompt, template, int(client_args.get("max_tokens", 512)))
        return judge if cache is None else CachedJudge(judge, cache, spec, workers=1)  # one model, one call at a time
    kind, target, model = parse_spec(spec)
    if kind == "file":
        return ReplayJudge(Path(target))
    judge = OpenAIJudge(target, model, system_prompt, template, **client_args)
    return judge if cache is None else CachedJudge(judge, cache, f"openai:{model or target}")


def local_judge(kind: str, path: str, system_prompt: str, template: str, max_new_tokens: int = 512) -> Callable[[str, str, str], str]:
    """A judge on a model loaded in this process: ``hf`` (transformers ``generate``, as V-STaR's
    eval.py runs its judge) or ``vllm`` (the model's default sampling settings, as ``generate``
    uses them)."""

    def messages(question: str, reference: str, candidate: str) -> list[dict[str, str]]:
        return [{"role": "system", "content": system_prompt}, {"role": "user", "content": template.format(question, reference, candidate)}]

    if kind == "vllm":
        from vllm import LLM

        llm = LLM(model=path)
        params = llm.get_default_sampling_params()
        params.max_tokens = max_new_tokens

        def judge_vllm(question: str, reference: str, candidate: str) -> str:
            return llm.chat(messages(question, reference, candidate), params, use_tqdm=False)[0].outputs[0].text

        return judge_vllm
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(path, torch_dtype="auto", device_map="auto")
    tokenizer = AutoTokenizer.from_pretrained(path)

    def judge_hf(question: str, reference: str, candidate: str) -> str:
        text = tokenizer.apply_chat_template(messages(question, reference, candidate), tokenize=False, add_generation_prompt=True)
        inputs = tokenizer([text], return_tensors="pt").to(model.device)
        out = model.generate(**inputs, max_new_tokens=max_new_tokens)
        return tokenizer.batch_decode(out[:, inputs.input_ids.shape[1]:], skip_special_tokens=True)[0]

    return judge_hf
