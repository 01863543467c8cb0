# The LatencyLens service (collector + query API) for a production-like stack.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY instrumentation instrumentation
COPY collector collector
COPY migrations migrations
RUN pip install --no-cache-dir ".[server]"
ENV LATENCYLENS_HOST=0.0.0.0 \
    LATENCYLENS_PORT=4318
EXPOSE 4318
CMD ["latencylens", "serve"]
