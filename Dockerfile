# The bridge's container image: the cdc-bridge command on Python 3.11.
# Not built in this repository's CI (no Docker engine on its machines).
FROM python:3.11-slim

WORKDIR /app
COPY pyproject.toml README.md ./
COPY bridge ./bridge
RUN pip install --no-cache-dir . && useradd --system --uid 10001 bridge
USER bridge
ENTRYPOINT ["cdc-bridge"]
CMD ["--help"]
