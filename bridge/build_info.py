"""What this installation runs on its hot path, for `cdc-bridge --version` and the worker's
start-up log line: the bridge's own code is pure Python (compiling it with mypyc measured 0-4%,
bench/README.md), and its speed rests on compiled libraries, the CQL driver's row parser above
all: a driver installed without its Cython extensions (`CASS_DRIVER_NO_CYTHON`, a platform
without a wheel) spends 5-7 times the CPU per row paged (README.md, Benchmarks), and nothing
else tells it."""

from __future__ import annotations

import platform

from bridge import __version__


def hot_path() -> dict[str, str]:
    """Library versions and whether the driver's compiled row parser is in use."""
    import cassandra
    import confluent_kafka
    import orjson
    from cassandra import cython_deps

    return {
        "bridge_code": "pure Python",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "cassandra_driver": cassandra.__version__,
        "driver_row_parser": "compiled (Cython)" if cython_deps.HAVE_CYTHON else "pure Python (slow)",
        "confluent_kafka": confluent_kafka.version(),
        "librdkafka": confluent_kafka.libversion()[0],
        "orjson": orjson.__version__,
    }


def version_text() -> str:
    return f"cdc-bridge {__version__} (" + "; ".join(f"{k}: {v}" for k, v in hot_path().items()) + ")"
