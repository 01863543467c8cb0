"""A FastAPI app instrumented with LatencyLens.

The request's root span comes from ``opentelemetry-instrumentation-fastapi``; LatencyLens adds
the retrieval, tool and model-call spans beneath it. Run it with

    LATENCYLENS_PROVIDER_URL=http://127.0.0.1:8000/openai/v1 uvicorn examples.fastapi_app:app

and point ``LATENCYLENS_ENDPOINT`` at the collector (default http://127.0.0.1:4318).
"""

from __future__ import annotations

import os
import time

import openai
from fastapi import FastAPI
from opentelemetry import trace
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

import latencylens

latencylens.configure(service_name="fastapi-chat")
client = openai.OpenAI(
    base_url=os.environ.get("LATENCYLENS_PROVIDER_URL", "http://127.0.0.1:8000/openai/v1"),
    api_key=os.environ.get("GROQ_API_KEY", "local"),
    max_retries=0,
)
app = FastAPI(title="chat")
FastAPIInstrumentor.instrument_app(app)


@latencylens.retrieval(data_source="faq")
def retrieve(question: str) -> list[str]:
    time.sleep(0.01)
    return [f"faq entry for {question}"]


@latencylens.model_call(provider="groq", model="llama-3.3-70b-versatile")
def complete(messages: list[dict[str, str]]) -> openai.Stream:  # type: ignore[type-arg]
    return client.chat.completions.create(
        model="llama-3.3-70b-versatile",
        messages=messages,
        stream=True,  # type: ignore[arg-type]
    )


@app.post("/chat")
def chat(question: str) -> dict[str, str]:
    docs = retrieve(question)
    messages = [{"role": "system", "content": " ".join(docs)}, {"role": "user", "content": question}]
    answer = "".join(chunk.choices[0].delta.content or "" for chunk in complete(messages) if chunk.choices)
    trace_id = trace.get_current_span().get_span_context().trace_id
    return {"answer": answer, "trace_id": f"{trace_id:032x}"}
