"""Beam's Google Cloud connectors deferred (tfxd.deferred_imports): judged by Beam's own apache_beam.io imported
without tfxd in a fresh process, every name it binds is read from the deferred one, the same objects, while
importing Beam after tfxd imports no google.cloud.bigquery; a direct import of the connector is never refused."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

BEAMS_OWN = """
    import json
    import apache_beam.io as io
    print(json.dumps(sorted(name for name in vars(io) if not name.startswith("_"))))
"""
DEFERRED = """
    import json, sys
    import tfxd
    import apache_beam as beam
    before = "google.cloud.bigquery" in sys.modules
    own = {name for name in vars(beam.io) if not name.startswith("_")}
    read = {name: getattr(beam.io, name) for name in json.loads(sys.argv[1])}  # deferred ones: __getattr__
    from apache_beam.io.gcp import bigquery, pubsub
    same = read["ReadFromBigQuery"] is bigquery.ReadFromBigQuery and read["WriteToPubSub"] is pubsub.WriteToPubSub
    try:
        beam.io.NoSuchConnector
        missing = None
    except AttributeError as exc:
        missing = str(exc)
    print(json.dumps({"before": before, "own": sorted(own), "same": same, "missing": missing,
                      "after": "google.cloud.bigquery" in sys.modules}))
"""


def _python(code: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def test_every_name_beam_binds_is_read_from_the_deferred_io():
    beams = json.loads(_python(BEAMS_OWN))  # Beam's own __init__, tfxd not imported
    assert {"ReadFromBigQuery", "WriteToBigQuery", "ReadFromPubSub", "gcsio", "ReadFromText"} <= set(beams)
    outcome = json.loads(_python(DEFERRED, json.dumps(beams)))
    assert outcome["before"] is False  # importing Beam after tfxd left BigQuery's client out
    assert "ReadFromBigQuery" not in outcome["own"] and "ReadFromText" in outcome["own"]
    assert outcome["same"] and outcome["after"] is True
    assert outcome["missing"] == "module 'apache_beam.io' has no attribute 'NoSuchConnector'"


def test_a_direct_import_of_the_connector_is_not_refused():
    assert _python("""
        import tfxd
        import apache_beam
        import apache_beam.io.gcp.bigquery as bigquery
        print(bigquery.WriteToBigQuery.__name__)
    """) == "WriteToBigQuery"
