# syntax=docker/dockerfile:1
# The scylla-cdc-bridge images.
#   docker build -t scylla-cdc-bridge .                              the worker (default, last stage):
#                                                                    `cdc-bridge run --config FILE`
#   docker build --target spark -t scylla-cdc-bridge-spark .         the Spark job: Java 17, pyspark,
#                                                                    delta-spark, Kafka/Avro/Delta jars baked in
# Python dependencies come only from the hashed locks in deploy/docker (scripts/lock-image), installed by
# deploy/docker/install-venv. This repository's CI has no Docker engine: tests/ship/test_dockerfile.py
# lints this file with hadolint, checks the essentials below and runs install-venv itself.

ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm
ARG MAVEN_IMAGE=maven:3.9.9-eclipse-temurin-17
ARG PYTHON_MINOR=3.11

# ---------------------------------------------------------------- worker: build the virtualenv
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY deploy/docker/ deploy/docker/
COPY pyproject.toml README.md ./
COPY bridge/ bridge/
RUN deploy/docker/install-venv /opt/venv deploy/docker/requirements.lock /src

# ---------------------------------------------------------------- spark: jars resolved once, at build time
FROM ${MAVEN_IMAGE} AS spark-jars
WORKDIR /jars
COPY deploy/docker/spark-jars/pom.xml pom.xml
RUN mvn --batch-mode --quiet dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=/jars/lib \
    && mvn --batch-mode --quiet dependency:list -DincludeScope=runtime -DoutputFile=/jars/listing.txt

# ---------------------------------------------------------------- spark: build the virtualenv
FROM ${PYTHON_IMAGE} AS spark-build
ARG PYTHON_MINOR
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1 SOURCE_BUILDS=pyspark
WORKDIR /src
COPY deploy/docker/ deploy/docker/
COPY pyproject.toml README.md ./
COPY bridge/ bridge/
RUN deploy/docker/install-venv /opt/venv deploy/docker/requirements-spark.lock /src
# Onto pyspark's own class path, where pyspark's versions of shared libraries win: the job needs no
# spark.jars.packages and no network at run time.
COPY --from=spark-jars /jars/ /jars/
RUN deploy/docker/merge-spark-jars /jars/listing.txt /jars/lib \
    /opt/venv/lib/python${PYTHON_MINOR}/site-packages/pyspark/jars \
    && install -m 0755 deploy/docker/spark-entrypoint /opt/venv/bin/spark-entrypoint

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
       --shell /usr/sbin/nologin bridge
COPY --from=spark-build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 HOME=/tmp \
    SPARK_HOME=/opt/venv/lib/python${PYTHON_MINOR}/site-packages/pyspark PYSPARK_PYTHON=/opt/venv/bin/python \
    CDC_BRIDGE_SPARK_JARS_BAKED=1
USER 10001:10001
WORKDIR /tmp
# A streaming job has no probe port of its own; the Spark UI (4040) answers while the driver runs.
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:4040/api/v1/applications', timeout=4)"]
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
