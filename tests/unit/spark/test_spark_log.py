"""Where a local JVM's console output goes (bridge/spark/spark_log.py), pure parts: the default
file, the java option naming our log4j2 settings, the tail a failing job prints, and the flags."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from bridge.cli import build_parser
from bridge.spark import spark_log

pytestmark = pytest.mark.unit


def test_default_file_is_new_per_run_under_the_temp_folder() -> None:
    path = spark_log.default_path("mirror-1")
    assert path.parent == Path(tempfile.gettempdir()) / "cdc-bridge-spark"
    assert path.name.startswith("mirror-1-") and path.suffix == ".log"


def test_the_java_option_names_our_log4j2_file_that_exists() -> None:
    assert spark_log.LOG4J2_PROPERTIES.is_file()
    option = spark_log.java_option()
    assert option == f"-Dlog4j2.configurationFile={spark_log.LOG4J2_PROPERTIES.as_uri()}"
    assert "executor-heartbeater" in spark_log.LOG4J2_PROPERTIES.read_text()


def test_tail_is_the_files_last_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spark_log, "_current", None)
    assert spark_log.tail() == []
    log = tmp_path / "spark.log"
    log.write_text("".join(f"line {n}\n" for n in range(100)))
    monkeypatch.setattr(spark_log, "_current", log)
    assert spark_log.tail(3) == ["line 97", "line 98", "line 99"]


@pytest.mark.parametrize("job", ["flatten", "mirror", "history"])
def test_every_job_takes_spark_log_and_verbose(job: str) -> None:
    required = {"mirror": ["--delta", "d"], "history": ["--output", "o"]}.get(job, [])
    args = build_parser().parse_args(["spark", job, "--checkpoint", "c", *required, "--spark-log", "/x/s.log",
                                      "--verbose"])
    assert (args.spark_log, args.verbose) == (Path("/x/s.log"), True)
    args = build_parser().parse_args(["spark", job, "--checkpoint", "c", *required])
    assert (args.spark_log, args.verbose) == (None, False)
