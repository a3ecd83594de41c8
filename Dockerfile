# The image of docker-compose.yml's `parka ingest` worker: parka with its runtime dependencies
# only (no Spark, no dev tools), and prometheus-client for --metrics-port and its health endpoints. `docker compose build` builds it; by hand:
#   docker build -t parka:local .   then   docker run --rm parka:local ingest --help
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# The build context is only what the package needs (.dockerignore lists it), so editing tests,
# benchmarks or docs other than the README does not invalidate this layer.
COPY pyproject.toml README.md /tmp/parka-src/
COPY parka /tmp/parka-src/parka
COPY producer /tmp/parka-src/producer
COPY consumer /tmp/parka-src/consumer
COPY lake /tmp/parka-src/lake
COPY ops /tmp/parka-src/ops
COPY spark_ext /tmp/parka-src/spark_ext
RUN pip install "/tmp/parka-src[lake,metrics]" && rm -rf /tmp/parka-src \
    && useradd --create-home --uid 10001 parka

USER parka
WORKDIR /home/parka
ENTRYPOINT ["parka"]
CMD ["ingest", "--help"]
