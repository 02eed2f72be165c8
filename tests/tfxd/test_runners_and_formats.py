"""The runners and formats tables (tfxd/beam_engines.py, tfxd/formats.py) are all the spec, the assembly
and the run know of a runner or a format: a row added is taken everywhere, ExampleGen's readers are the
table's file formats, and `make engines` installs an engine for each row with a job server."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import BASE_SPEC, REPO, write_spec
from tfxd.beam_engines import ENGINES, runner_named
from tfxd.direct_runner import direct_args
from tfxd.formats import FORMATS

# A portable runner the table does not have: Samza, whose Beam job server the Python SDK reaches through
# Beam's PortableRunner (Beam's runners/samza/job). Its facts here are a test's, not Samza's.
SAMZA = """
from tfxd import beam_engines
samza = beam_engines.Engine("samza", "Samza", "PortableRunner", main="org.apache.beam.runners.samza.SamzaJobServerDriver",
                            master_flag="--samza-master", master_example="samza-host:1234", embedded="local",
                            parallelism_flag="--parallelism", version="1.6")
beam_engines.RUNNERS["samza"] = beam_engines.ENGINES["samza"] = samza
"""


def _with_a_row(row: str, script: str) -> dict:
    """What ``script`` prints (JSON) in a fresh interpreter where ``row`` was added to a table before any
    of tfxd's models were built: as a row written in the table is."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(row) + textwrap.dedent(script)],
                         capture_output=True, text=True, check=True, cwd=REPO).stdout
    return json.loads(out.splitlines()[-1])


def test_a_runner_row_is_all_the_spec_the_assembly_and_replay_need(project):
    spec = write_spec(project, BASE_SPEC + "beam: {runner: samza, job_endpoint: 'samza-job-server:8099', workers: 3}\n")
    found = _with_a_row(SAMZA, f"""
        import json
        from tfxd.pipeline.assembly.beam_args import beam_args, compiled_engine
        from tfxd.pipeline.spec.document import Beam, Spec
        from tfxd.pipeline.spec.errors import SpecError
        from tfxd.pipeline.spec.load import load_spec

        args = beam_args(load_spec({str(spec)!r}).spec, image="gcr.io/p/tfxd:1")
        schema = Spec.model_json_schema()["$defs"]["Beam"]["properties"]
        embedded = Beam(runner="samza", master="samza-host:1234")
        print(json.dumps({{"enum": schema["runner"]["enum"], "master": schema["master"]["description"],
                          "args": args, "compiled": compiled_engine(args), "job_server": embedded.needs_job_server}}))
        """)
    assert found["enum"] == ["direct", "dataflow", "flink", "spark", "samza"]
    assert found["master"].startswith("flink, spark and samza: the cluster's master, e.g. flink-jobmanager:8081 "
                                      "(flink) or spark://host:7077 (spark) or samza-host:1234 (samza);")
    assert found["args"][:2] == ["--runner=PortableRunner", "--job_endpoint=samza-job-server:8099"]
    assert "--parallelism=3" in found["args"] and "--sdk_container_image=gcr.io/p/tfxd:1" in found["args"]
    assert found["compiled"] == ["samza", 3] and found["job_server"] is True


def test_a_format_row_is_all_the_spec_needs(project):
    (project / "data.avro").write_bytes(b"Obj\x01")
    spec = write_spec(project, BASE_SPEC.replace("format: csv", "format: avro").replace("data.csv", "data.avro"))
    found = _with_a_row("""
        from tfxd import formats
        formats.FORMATS["avro"] = formats.Format("avro")
        """, f"""
        import json
        from tfxd.pipeline.spec.document import Spec
        from tfxd.pipeline.spec.load import load_spec

        loaded = load_spec({str(spec)!r})
        schema = Spec.model_json_schema()["$defs"]["Data"]["properties"]["format"]
        print(json.dumps({{"format": loaded.spec.data.format, "schema": schema}}))
        """)
    assert found["format"] == "avro"
    assert found["schema"]["enum"] == ["csv", "parquet", "tfrecord", "jsonl", "bigquery", "avro"]
    assert found["schema"]["description"] == "csv | parquet | tfrecord | jsonl | bigquery | avro"


def test_example_gens_readers_are_the_tables_file_formats():
    """Row-wise and column-wise, ExampleGen reads every format the table reads from files, and no other;
    BigQuery's rows come from Beam's BigQuery IO, not from a file reader."""
    from tfxd.components.example_gen.column_sources import SOURCES
    from tfxd.components.example_gen.records import READERS

    files = {name for name, data_format in FORMATS.items() if data_format.files}
    assert set(READERS) == set(SOURCES) == files
    assert not FORMATS["bigquery"].files and "bigquery" not in files


def test_make_engines_installs_an_engine_for_each_job_server_row():
    """The Makefile builds engines/<name>/pom.xml for each folder there; each is a row's, and names the
    Beam runner module and the engine's version the row says; the job server's main is Beam's, or tfxd's own
    in engines/<name>/src, which `make engines` compiles."""
    poms = {path.parent.name: path.read_text(encoding="utf-8") for path in (REPO / "engines").glob("*/pom.xml")}
    assert set(poms) == set(ENGINES) == {"flink", "spark"}
    for name, engine in ENGINES.items():
        assert f"<artifactId>beam-runners-{name}-" in poms[name] and engine.version in poms[name]
        own = REPO / "engines" / name / "src" / Path(*engine.main.split(".")).with_suffix(".java")
        assert engine.main.startswith(f"org.apache.beam.runners.{name}.") or own.is_file(), engine.main
    assert ENGINES["flink"].main.startswith("dev.tfxd.engines.flink.")  # one cluster for a run's jobs
    assert ENGINES["spark"].main.startswith("dev.tfxd.engines.spark.")  # the run's context with the server


@pytest.mark.parametrize(("written", "row"), [
    (direct_args("in_memory", 1)[0].split("=", 1)[1], "direct"),  # what tfxd writes
    ("direct", "direct"), ("DIRECT", "direct"),  # Beam's short names, in any case
    ("apache_beam.runners.direct.direct_runner.DirectRunner", "direct"),
    ("DataflowRunner", "dataflow"),
    ("tfxd.beam_runners.FlinkRunner", "flink"),
    ("apache_beam.runners.portability.spark_runner.SparkRunner", "spark"),  # files compiled before tfxd's
    ("PortableRunner", None), ("PrismRunner", None),
])
def test_a_runner_is_found_by_any_name_beam_takes_for_it(written, row):
    """Beam's create_runner (apache_beam/runners/runner.py) takes a runner's class name or the name less
    "Runner", lower-cased, or a dotted path."""
    found = runner_named(written)
    assert (found.name if found else None) == row


def test_an_embedded_engines_master_is_the_one_its_job_server_takes():
    """Flink's job server runs a mini cluster for "[local]"; Spark's a local one with N slots for
    "local[N]" (FlinkJobServerDriver's --flink-master, SparkJobServerDriver's --spark-master-url)."""
    assert [ENGINES[name].embedded_master(4) for name in ("flink", "spark")] == ["[local]", "local[4]"]


def test_validate_reads_a_parquet_files_columns_from_its_schema(project):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tfxd.pipeline.spec.errors import SpecError
    from tfxd.pipeline.spec.load import load_spec

    pq.write_table(pa.table({"x": [1.0], "cty": ["a"], "target": [1]}), project / "data.parquet")
    spec = write_spec(project, BASE_SPEC.replace("format: csv", "format: parquet").replace("data.csv", "data.parquet"))
    with pytest.raises(SpecError, match="feature 'city' is not a column of data.parquet") as caught:
        load_spec(str(spec))
    assert "the data has: x, cty, target" in str(caught.value)
    (project / "data.parquet").write_bytes(b"not parquet")  # unreadable: its columns are not told, nor judged
    assert load_spec(str(spec)).spec.data.format == "parquet"
