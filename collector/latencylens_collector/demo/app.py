"""The demo's instrumented application: retrieval, a tool call and a streamed model call.

It is what a user's code looks like with LatencyLens: plain functions with one decorator each.
"""

from __future__ import annotations

import random
import time

import openai
from openai.types.chat import ChatCompletionChunk, ChatCompletionMessageParam

import latencylens

MODEL = "llama-3.3-70b-versatile"


class ChatApp:
    """Answers a question the way many RAG apps do: look up, call a tool, stream an answer."""

    def __init__(self, provider_base_url: str, seed: int = 11) -> None:
        self._client = openai.OpenAI(base_url=provider_base_url, api_key="demo-key", max_retries=0)
        self._rng = random.Random(seed)

    @latencylens.retrieval(data_source="product-docs")
    def retrieve(self, question: str) -> list[str]:
        time.sleep(self._rng.uniform(0.01, 0.05) if self._rng.random() > 0.15 else 0.25)
        return [f"doc about {word}" for word in question.split()[:3]]

    @latencylens.tool(name="order_status")
    def order_status(self, order_id: str) -> str:
        time.sleep(self._rng.uniform(0.005, 0.03))
        return f"order {order_id} ships tomorrow"

    @latencylens.model_call(provider="groq", model=MODEL)
    def complete(self, messages: list[ChatCompletionMessageParam]) -> openai.Stream[ChatCompletionChunk]:
        return self._client.chat.completions.create(model=MODEL, messages=messages, stream=True)

    @latencylens.request(name="POST /chat")
    def answer(self, question: str) -> str:
        docs = self.retrieve(question)
        status = self.order_status("A-1042")
        messages: list[ChatCompletionMessageParam] = [
            {"role": "system", "content": "Answer from the documents. " + " ".join(docs)},
            {"role": "user", "content": f"{question} ({status})"},
        ]
        text = "".join(
            chunk.choices[0].delta.content or "" for chunk in self.complete(messages) if chunk.choices
        )
        time.sleep(0.003)  # validating the answer: the app's own work
        return text
