# The LatencyLens service (OTLP collector + query API + built-in web UI) for a production-like stack.
# The UI is static files inside the package: nothing is built or fetched when the container runs.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY instrumentation instrumentation
COPY collector collector
COPY migrations migrations
RUN pip install --no-cache-dir ".[server]" \
    && useradd --system --uid 10001 --home-dir /app latencylens \
    && mkdir -p /app/.latencylens && chown latencylens /app/.latencylens
# Without LATENCYLENS_CLICKHOUSE_DSN the service uses embedded ClickHouse in /app/.latencylens.
VOLUME ["/app/.latencylens"]
USER latencylens
ENV LATENCYLENS_HOST=0.0.0.0 \
    LATENCYLENS_PORT=4318 \
    PYTHONUNBUFFERED=1
EXPOSE 4318
HEALTHCHECK --interval=10s --timeout=5s --retries=6 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:4318/healthz', timeout=3)"]
CMD ["latencylens", "serve"]
