# syntax=docker/dockerfile:1
# The scylla-cdc-bridge images.
#   docker build -t scylla-cdc-bridge .                              the worker (default, last stage):
#                                                                    `cdc-bridge run --config FILE`
#   docker build --target spark -t scylla-cdc-bridge-spark .         the Spark job: Java 17, pyspark,
#                                                                    delta-spark, the Kafka and Delta jars baked in
# Python dependencies come only from the hashed locks in deploy/docker (scripts/lock-image), installed by
# deploy/docker/install-venv. This repository's CI has no Docker engine: tests/ship/test_dockerfile.py
# lints this file with hadolint, checks the essentials below and runs install-venv itself.

# Pinned by tag and digest (of the multi-architecture index): the tag is re-pushed with Debian's
# updates, the digest always names the same image. To move on, take the new digest with
# `docker buildx imagetools inspect python:3.11.14-slim-bookworm` (first line, "Digest:").
# Every stage, the Spark ones included, starts from this one image.
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d
ARG PYTHON_MINOR=3.11

# ---------------------------------------------------------------- worker: build the virtualenv
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY deploy/docker/ deploy/docker/
COPY pyproject.toml README.md ./
COPY bridge/ bridge/
RUN deploy/docker/install-venv /opt/venv deploy/docker/requirements.lock /src

# ---------------------------------------------------------------- spark: virtualenv and jars
FROM ${PYTHON_IMAGE} AS spark-build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1 SOURCE_BUILDS=pyspark \
    CDC_BRIDGE_IVY_DIR=/opt/ivy
# hadolint ignore=DL3008
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY deploy/docker/ deploy/docker/
COPY pyproject.toml README.md ./
COPY bridge/ bridge/
RUN deploy/docker/install-venv /opt/venv deploy/docker/requirements-spark.lock /src \
    && install -m 0755 deploy/docker/spark-entrypoint /opt/venv/bin/spark-entrypoint
# The job's own session start resolves its packages (`cdc-bridge spark packages`: the Kafka source,
# Delta) with Spark's Ivy into CDC_BRIDGE_IVY_DIR, once, here: at run time they come from that
# cache and the job needs no network.
RUN /opt/venv/bin/python -c "from bridge.spark.core.session import build_session; build_session().stop()" \
    && test -n "$(ls /opt/ivy/jars)"

# ---------------------------------------------------------------- spark: the job's image
FROM ${PYTHON_IMAGE} AS spark
ARG PYTHON_MINOR
# The Debian security archive replaces point releases, so a pinned JRE version would stop building;
# the base image tag pins the distribution (so DL3008, "pin apt versions", is ignored here).
# hadolint ignore=DL3008
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 bridge \
    && useradd --system --uid 10001 --gid bridge --home-dir /nonexistent --no-create-home \
       --shell /usr/sbin/nologin bridge \
    && install -d -o 10001 -g 10001 /data
# /data: checkpoints and Delta tables (a volume there starts owned by the job's user)
COPY --from=spark-build /opt/venv /opt/venv
# Ivy writes its resolution reports into the cache: the job's user owns it.
COPY --from=spark-build --chown=10001:10001 /opt/ivy /opt/ivy
ENV PATH=/opt/venv/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 HOME=/tmp \
    SPARK_HOME=/opt/venv/lib/python${PYTHON_MINOR}/site-packages/pyspark PYSPARK_PYTHON=/opt/venv/bin/python \
    CDC_BRIDGE_IVY_DIR=/opt/ivy
USER 10001:10001
WORKDIR /tmp
# No probe port (the local-mode job runs without the Spark UI): the container lives exactly as long as
# the job, which exits non-zero when its query fails.
HEALTHCHECK NONE
# `driver`/`executor` for Spark on Kubernetes (SparkApplication), anything else is a cdc-bridge command
ENTRYPOINT ["spark-entrypoint"]
CMD ["spark", "--help"]

# ---------------------------------------------------------------- worker: the image (default target)
FROM ${PYTHON_IMAGE} AS worker
RUN groupadd --system --gid 10001 bridge \
    && useradd --system --uid 10001 --gid bridge --home-dir /nonexistent --no-create-home \
       --shell /usr/sbin/nologin bridge
COPY --from=build /opt/venv /opt/venv
# PYTHONDONTWRITEBYTECODE: the root filesystem may be read-only (the Helm chart makes it so).
ENV PATH=/opt/venv/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER 10001:10001
WORKDIR /tmp
# metrics.port: /metrics, /healthz (the main loop turns), /readyz (serving its slots).
EXPOSE 9404
# Set the port with CDC_BRIDGE_METRICS_PORT (not only in the file) when it is not 9404, so this probe follows.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('CDC_BRIDGE_METRICS_PORT', '9404'), timeout=4)"]
ENTRYPOINT ["cdc-bridge"]
CMD ["run", "--config", "/etc/cdc-bridge/worker.properties"]
