"""Ragas' side of the cross-check (bench/ragas): scores each row of rows.json with Ragas'
own metrics, their LLM a scripted one that answers every Ragas prompt from the same table as
assay's scripted judge (crates/assay-cli/examples/answer_judge.rs), and their embeddings a
lookup in the table's `embeddings`.

Usage: python ragas_side.py rows.json   (prints {"rows": [{"id", "metrics": {...}}]})

Each metric's entry is {"score": float | null, "note": str | null}: null with a note where
Ragas gives NaN or cannot run the metric (LLMContextRecall needs a reference).

No network: no OpenAI (or other) client is created, llm= and embeddings= are passed to every
metric, Ragas' usage tracking is off, and any socket connection raises.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import socket
import sys
import typing as t

os.environ["RAGAS_DO_NOT_TRACK"] = "true"


def _no_network(*_args, **_kwargs):
    raise OSError("bench/ragas runs offline: something tried to open a connection")


socket.socket.connect = _no_network  # type: ignore[method-assign]
socket.socket.connect_ex = _no_network  # type: ignore[method-assign]
socket.create_connection = _no_network  # type: ignore[assignment]

from langchain_core.outputs import Generation, LLMResult  # noqa: E402
from ragas.dataset_schema import SingleTurnSample  # noqa: E402
from ragas.embeddings.base import BaseRagasEmbeddings  # noqa: E402
from ragas.llms.base import BaseRagasLLM  # noqa: E402
from ragas.metrics import (  # noqa: E402
    Faithfulness,
    LLMContextPrecisionWithoutReference,
    LLMContextPrecisionWithReference,
    LLMContextRecall,
    ResponseRelevancy,
)
from ragas.metrics._answer_relevance import ResponseRelevancePrompt  # noqa: E402
from ragas.metrics._context_precision import ContextPrecisionPrompt  # noqa: E402
from ragas.metrics._context_recall import ContextRecallClassificationPrompt  # noqa: E402
from ragas.metrics._faithfulness import (  # noqa: E402
    NLIStatementPrompt,
    StatementGeneratorPrompt,
)


def norm(text: str) -> str:
    """Runs of whitespace made one space, trimmed (as answer_judge.rs matches texts)."""
    return " ".join(text.split())


def sentences(text: str) -> list[str]:
    """answer_judge.rs' `sentences`: split after `.`, `!` or `?` before a space or the end."""
    out, current = [], ""
    for i, c in enumerate(text):
        current += c
        nxt = text[i + 1] if i + 1 < len(text) else None
        if c in ".!?" and (nxt is None or nxt.isspace()):
            if norm(current):
                out.append(norm(current))
            current = ""
    if norm(current):
        out.append(norm(current))
    return out


class Table:
    """answer_judge.rs' table, read the same way (texts normalised)."""

    KEYS = {"claims", "verdicts", "useful", "questions", "noncommittal", "garbage",
            "invalid", "embeddings"}

    def __init__(self, raw: dict, rows: list[dict]):
        unknown = set(raw) - self.KEYS
        if unknown:
            raise ValueError(f"unknown key(s) in the table: {sorted(unknown)}")
        if raw.get("garbage") or raw.get("invalid"):
            raise ValueError("`garbage` and `invalid` test assay's error path; Ragas has no "
                             "counterpart, so the cross-check does not use them")
        self.claims = {norm(k): [norm(c) for c in v] for k, v in raw.get("claims", {}).items()}
        self.verdicts: dict[str, tuple[bool, str | None]] = {}
        for claim, v in raw.get("verdicts", {}).items():
            if isinstance(v, bool):
                verdict = (v, None)
            elif isinstance(v, str):
                verdict = (True, v)
            elif isinstance(v, dict):
                verdict = (bool(v["supported"]), v.get("entity"))
            else:
                raise ValueError(f"verdicts.{claim}: expected an object, a string or a boolean")
            self.verdicts[norm(claim)] = verdict
        self.useful = {norm(k): [norm(x) for x in v] for k, v in raw.get("useful", {}).items()}
        self.questions = {norm(k): [norm(q) for q in v]
                          for k, v in raw.get("questions", {}).items()}
        self.noncommittal = {norm(r) for r in raw.get("noncommittal", [])}
        self.vectors = {norm(k): [float(x) for x in v]
                        for k, v in raw.get("embeddings", {}).items()}
        # Every context text of every row, with its entity: how a prompt's context string (one
        # context, or all of a row's joined by newlines) is mapped back to entities.
        self.entity_of: dict[str, str | None] = {}
        for row in rows:
            for c in row.get("contexts", []):
                self.entity_of[norm(c["text"])] = c.get("entity")

    def claims_of(self, text: str) -> list[str]:
        return self.claims.get(norm(text), sentences(text))

    def shown(self, context: str) -> list[str | None]:
        """The entities of the known contexts that appear in a prompt's context string."""
        hay = norm(context)
        return [e for text, e in self.entity_of.items() if text and text in hay]

    def verdict(self, claim: str, shown: list[str | None]) -> tuple[bool, str | None]:
        """answer_judge.rs' `Table::verdict`: an entity's verdict counts only when shown."""
        v = self.verdicts.get(norm(claim))
        if v is None:
            return (False, None)
        supported, entity = v
        if entity is not None and entity not in shown:
            return (False, None)
        return (supported, entity if supported else None)


PROMPTS = {
    "statements": StatementGeneratorPrompt.instruction,
    "nli": NLIStatementPrompt.instruction,
    "relevance": ResponseRelevancePrompt.instruction,
    "precision": ContextPrecisionPrompt().instruction,
    "recall": ContextRecallClassificationPrompt().instruction,
}
INPUT_MARK = "\nNow perform the same with the following input\ninput: "


def read_prompt(text: str) -> tuple[str, dict]:
    """Which Ragas prompt this is (by its instruction) and its input (the JSON block)."""
    kinds = [k for k, instruction in PROMPTS.items() if text.startswith(instruction)]
    if len(kinds) != 1:
        raise ValueError(f"not one of the five Ragas prompts this bench answers: {text[:120]!r}")
    _, sep, rest = text.rpartition(INPUT_MARK)
    if not sep:
        raise ValueError("the prompt has no input block")
    block = rest.rstrip()
    if block.endswith("Output:"):
        block = block[: -len("Output:")]
    return kinds[0], json.loads(block)


class ScriptedLLM(BaseRagasLLM):
    """Answers Ragas' prompts from the table, in Ragas' own output schemas."""

    def __init__(self, table: Table):
        super().__init__()
        self.table = table
        self.asked: dict[str, int] = {}  # reply → questions handed out (ResponseRelevancy)
        self.calls: list[str] = []

    def reset(self) -> None:
        self.asked.clear()

    def is_finished(self, response: LLMResult) -> bool:
        return True

    def reply(self, prompt: str) -> str:
        kind, data = read_prompt(prompt)
        self.calls.append(kind)
        tb = self.table
        if kind == "statements":
            return json.dumps({"statements": tb.claims_of(data["answer"])})
        if kind == "nli":
            shown = tb.shown(data["context"])
            return json.dumps({"statements": [
                {"statement": s, "reason": "scripted",
                 "verdict": int(tb.verdict(s, shown)[0])}
                for s in data["statements"]]})
        if kind == "relevance":
            # Ragas asks `strictness` times with the same prompt; the i-th ask gets the i-th
            # question of the table's list, cycled (answer_judge.rs cycles it the same way).
            response = norm(data["response"])
            pool = tb.questions.get(response, tb.claims_of(response))
            i = self.asked.get(response, 0)
            self.asked[response] = i + 1
            question = pool[i % len(pool)] if pool else ""
            return json.dumps({"question": question,
                               "noncommittal": int(response in tb.noncommittal)})
        if kind == "precision":
            # One context, judged against `answer` (the reference, or the response in the
            # without-reference variant).
            context = norm(data["context"])
            entity = tb.entity_of.get(context)
            target = data["answer"]
            if norm(target) in tb.useful:
                useful = set(tb.useful[norm(target)])
            else:
                shown = [entity]
                useful = {e for c in tb.claims_of(target)
                          if (e := tb.verdict(c, shown)[1]) is not None}
            is_useful = context in useful or (entity is not None and entity in useful)
            return json.dumps({"reason": "scripted", "verdict": int(is_useful)})
        # recall
        shown = tb.shown(data["context"])
        return json.dumps({"classifications": [
            {"statement": c, "reason": "scripted",
             "attributed": int(tb.verdict(c, shown)[0])}
            for c in tb.claims_of(data["answer"])]})

    def generate_text(self, prompt, n: int = 1, temperature: float = 1e-8, stop=None,
                      callbacks=None) -> LLMResult:
        text = prompt.to_string()
        return LLMResult(generations=[[Generation(text=self.reply(text)) for _ in range(n)]])

    async def agenerate_text(self, prompt, n: int = 1, temperature: t.Optional[float] = None,
                             stop=None, callbacks=None) -> LLMResult:
        return self.generate_text(prompt, n=n, stop=stop, callbacks=callbacks)


class LookupEmbeddings(BaseRagasEmbeddings):
    """The table's vectors, by text."""

    def __init__(self, table: Table):
        super().__init__()
        self.table = table

    def embed_query(self, text: str) -> list[float]:
        try:
            return self.table.vectors[norm(text)]
        except KeyError:
            raise KeyError(f"the table has no embedding for {text!r}") from None

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(x) for x in texts]

    async def aembed_query(self, text: str) -> list[float]:
        return self.embed_query(text)

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed_documents(texts)


def outcome(score: float) -> dict:
    score = float(score)
    if math.isnan(score):
        return {"score": None, "note": "NaN"}
    return {"score": score, "note": None}


async def score_rows(doc: dict) -> dict:
    table = Table(doc["table"], doc["rows"])
    llm = ScriptedLLM(table)
    embeddings = LookupEmbeddings(table)
    faithfulness = Faithfulness(llm=llm)
    relevancy = ResponseRelevancy(llm=llm, embeddings=embeddings,
                                  strictness=int(doc.get("relevancy_questions", 3)))
    precision_ref = LLMContextPrecisionWithReference(llm=llm)
    precision_reply = LLMContextPrecisionWithoutReference(llm=llm)
    recall = LLMContextRecall(llm=llm)
    out = []
    for row in doc["rows"]:
        reference = row.get("reference")
        sample = SingleTurnSample(
            user_input=row["question"],
            response=row["reply"],
            retrieved_contexts=[c["text"] for c in row.get("contexts", [])],
            reference=reference,
        )
        llm.reset()
        metrics = {
            "faithfulness": outcome(await faithfulness.single_turn_ascore(sample)),
            "answer_relevancy": outcome(await relevancy.single_turn_ascore(sample)),
        }
        if reference is not None:
            metrics["context_precision"] = outcome(await precision_ref.single_turn_ascore(sample))
            metrics["context_recall"] = outcome(await recall.single_turn_ascore(sample))
        else:
            precision = outcome(await precision_reply.single_turn_ascore(sample))
            if precision["score"] is not None:
                precision["note"] = "LLMContextPrecisionWithoutReference"
            metrics["context_precision"] = precision
            metrics["context_recall"] = {
                "score": None, "note": "not run: LLMContextRecall requires a reference"}
        out.append({"id": row["id"], "metrics": metrics})
    return {"rows": out, "prompts_answered": len(llm.calls)}


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: ragas_side.py ROWS.json", file=sys.stderr)
        return 2
    with open(sys.argv[1], encoding="utf-8") as f:
        doc = json.load(f)
    print(json.dumps(asyncio.run(score_rows(doc)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
