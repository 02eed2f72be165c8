"""`tfxd run` for real, on small data: failures name the component and the log; a user's own
preprocessing_fn, in their own `pipeline` package, replaces the features; an unknown component is refused."""

from __future__ import annotations

import glob
import json
import os
import textwrap
from pathlib import Path

import pytest

from tests.conftest import BASE_SPEC, write_spec
from tests.pipeline.run.test_run_taxi import COMPONENTS, tf_records, tfxd


@pytest.mark.reliability("bad data")
def test_a_bad_record_fails_the_run_at_example_gen(project):
    (project / "data.csv").write_text("x,city,target\n1.0,a,1\n2.0,b,0,9\n")
    spec = write_spec(project, BASE_SPEC + "beam: {workers: 1}\n")
    result = tfxd("run", str(spec), "--to", "ExampleGen", cwd=project)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "ExampleGen failed:" in result.stderr
    assert "data.csv:3: ragged row: 4 fields where the header has 3" in result.stderr
    log = result.stderr.split("full log: ")[1].strip().splitlines()[0]
    assert os.path.isfile(log) and "Traceback" in Path(log).read_text()
    assert "Traceback" not in result.stderr


def test_an_unknown_component_is_refused(project):
    spec = write_spec(project, BASE_SPEC)
    result = tfxd("run", str(spec), "--to", "Trianer", cwd=project)
    assert result.returncode == 2 and "'Trianer' is not a component" in result.stderr
    assert "Trainer" in result.stderr
    assert not (project / "tfxd-runs").exists()


def test_users_preprocessing_fn_in_their_own_pipeline_package_replaces_the_features(project):
    """The user's project has packages named `pipeline` and `components`, as TFX's templates make: tfxd
    imports as tfxd.*, so theirs import by dotted path, here and in Beam's workers."""
    rows = "".join(f"{i % 7}.5,{'abc'[i % 3]},{i % 2}\n" for i in range(60))
    (project / "data.csv").write_text("x,city,target\n" + rows)
    for package in ("pipeline", "components"):
        (project / package).mkdir()
        (project / package / "__init__.py").write_text("")
    (project / "components" / "scaling.py").write_text("def double(x):\n    return x * 2.0\n")
    (project / "pipeline" / "preprocessing.py").write_text(textwrap.dedent("""\
        import tensorflow as tf

        from components.scaling import double


        def preprocessing_fn(inputs):
            x = tf.squeeze(inputs["x"], axis=1)
            return {"x_doubled": double(x), "y": tf.squeeze(inputs["target"], axis=1)}
        """))
    spec = BASE_SPEC.replace("features:\n  - name: x\n    transform: zscore\n  - name: city\n"
                             "    transform: vocabulary\n    top_k: 10\n",
                             "preprocessing_fn: pipeline.preprocessing:preprocessing_fn\n")
    result = tfxd("run", str(write_spec(project, spec + "beam: {workers: 1}\n")), "--to", "Transform", cwd=project)
    assert result.returncode == 0, result.stdout + result.stderr
    graphs = glob.glob(str(project / "tfxd-runs" / "demo" / "pipeline" / "Transform" / "transform_graph" / "*"))
    info = json.loads(Path(graphs[0], "tfxd_features.json").read_text())
    assert set(info["features"]) == {"x_doubled"}
    assert info["features"]["x_doubled"]["kind"] == "float"
    examples = str(project / "tfxd-runs" / "demo" / "pipeline" / "Transform" / "transformed_examples" / "*" /
                   "Split-train" / "*.gz")
    doubled = [x for record in tf_records(examples) for x in record.features.feature["x_doubled"].float_list.value]
    assert doubled and all(round(value % 2.0, 6) == 1.0 for value in doubled)  # (k + 0.5) * 2 = 2k + 1


SCHEMA = """
feature { name: "x" type: FLOAT presence { min_fraction: 1.0 min_count: 1 } shape { dim { size: 1 } } }
feature { name: "city" type: BYTES presence { min_fraction: 1.0 min_count: 1 } shape { dim { size: 1 } } }
feature { name: "target" type: INT presence { min_fraction: 1.0 min_count: 1 } shape { dim { size: 1 } } }
"""


@pytest.mark.reliability("bad data")
def test_a_column_whose_type_changed_stops_the_run_at_example_validator(project):
    (project / "schema.pbtxt").write_text(SCHEMA)
    # x was a number when the schema was made; this file has words in it
    rows = "".join(f"{'abc'[i % 3]}{i},{'pq'[i % 2]},{i % 2}\n" for i in range(40))
    (project / "data.csv").write_text("x,city,target\n" + rows)
    spec = write_spec(project, BASE_SPEC + "validation: {schema: schema.pbtxt}\nbeam: {workers: 1}\n")
    result = tfxd("run", str(spec), cwd=project)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "ExampleValidator failed: " in result.stderr
    assert "feature 'x'" in result.stderr and "feature 'city'" not in result.stderr
    assert "Fix the data, update validation.schema" in result.stderr
    assert "Transform" not in result.stdout  # stopped before Transform
    (summary,) = glob.glob(str(project / "tfxd-runs" / "demo" / "runs" / "*" / "summary.json"))
    statuses = {c["name"]: c["status"] for c in json.loads(Path(summary).read_text())["components"]}
    assert statuses["ExampleValidator"] == "failed" and statuses["Transform"] == "not run"


def test_the_beam_orchestrator_runs_the_whole_pipeline(project):
    rows = "".join(f"{(i % 7) + 0.5},{'abc'[i % 3]},{int(i % 7 > 3)}\n" for i in range(80))
    (project / "data.csv").write_text("x,city,target\n" + rows)
    # seeded and trained long enough to learn x > 3.5, so that the model is blessed and pushed every time
    trained = BASE_SPEC.replace("  steps: 10\n", "  steps: 100\n  seed: 42\n")
    assert trained != BASE_SPEC
    spec = write_spec(project, trained + "beam: {workers: 1}\ntargets:\n  local: {orchestrator: beam}\n"
                      "evaluation: {thresholds: {binary_accuracy: {min: 0.5}}}\n")
    result = tfxd("run", str(spec), cwd=project)  # nothing left in the temporary folder: the session checks
    assert result.returncode == 0, result.stdout + result.stderr
    (log,) = glob.glob(str(project / "tfxd-runs" / "demo" / "runs" / "*" / "logs" / "run.log"))
    assert "PrismRunner" not in Path(log).read_text()  # the orchestrator's own pipeline never tried Prism
    for name in COMPONENTS:
        assert f"ok {name} (" in result.stdout
    (path,) = glob.glob(str(project / "tfxd-runs" / "demo" / "runs" / "*" / "summary.json"))
    summary = json.loads(Path(path).read_text())
    assert {c["name"]: c["status"] for c in summary["components"]} == dict.fromkeys(COMPONENTS, "ran")
    assert summary["blessed"] is True and os.path.isdir(summary["pushed_to"])


def test_verbose_run_shows_the_components_logs_and_leaves_tfxds_options_to_tfxd(project):
    """`tfxd -v run`, as getting-started documents it: TFX's Beam executors parse sys.argv with absl's
    flags (tfx/dsl/components/base/base_beam_executor.py), where `-v` is --verbosity; with tfxd's own
    command line handed to them, ExampleGen failed on `--verbosity=run`."""
    (project / "data.csv").write_text("x,city,target\n1.0,a,1\n2.0,b,0\n3.0,a,1\n")
    spec = write_spec(project, BASE_SPEC + "beam: {workers: 1}\n")
    result = tfxd("-v", "run", str(spec), "--to", "ExampleGen", cwd=project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "--verbosity" not in result.stderr
    assert "Component ExampleGen is running." in result.stderr  # TFX's own log lines, live on the terminal
    assert "ExampleGen" in result.stdout
