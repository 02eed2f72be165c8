"""Wrong specs (a corpus of 60+): each fails with exit 2, file:line:col, the key path and a hint, no
traceback and nothing written; no YAML tag constructs anything."""

from __future__ import annotations

import re

import pytest

from tests.conftest import BASE_SPEC, run_cli, write_spec

DIRECTORY = None  # the spec path is a folder


def edit(old: str, new: str) -> str:
    assert old in BASE_SPEC, old
    return BASE_SPEC.replace(old, new, 1)


# (id, spec text, expected line, expected key path, a piece of the message or hint)
CASES = [
    # unknown keys at several depths
    ("unknown-top", BASE_SPEC + "trainng: {}\n", 19, "trainng", "did you mean 'training'?"),
    ("unknown-section-key", edit("  batch_size: 32", "  batchsize: 32"), 17, "training.batchsize",
     "did you mean 'batch_size'?"),
    ("unknown-feature-key", edit("    top_k: 10", "    topk: 10"), 11, "features[1].topk", "did you mean 'top_k'?"),
    ("unknown-deep-key", BASE_SPEC + "  callbacks:\n    early_stoping: true\n", 20,
     "training.callbacks.early_stoping", "did you mean 'early_stopping'?"),
    ("unknown-target-key", BASE_SPEC + "targets:\n  local:\n    orchestrater: beam\n", 21,
     "targets.local.orchestrater", "did you mean 'orchestrator'?"),
    ("bad-orchestrator", BASE_SPEC + "targets:\n  local: {orchestrator: airflow}\n", 20,
     "targets.local.orchestrator", "allowed values: local, beam"),
    ("unknown-target", BASE_SPEC + "targets:\n  vertexai: {}\n", 20, "targets.vertexai", "did you mean 'vertex'?"),
    # wrong types
    ("batch-size-string", edit("batch_size: 32", "batch_size: big"), 17, "training.batch_size",
     "valid integer"),
    ("batch-size-quoted-number", edit("batch_size: 32", "batch_size: '32'"), 17, "training.batch_size",
     "valid integer"),
    ("steps-float", edit("steps: 10", "steps: 10.5"), 18, "training.steps", "valid integer"),
    ("features-not-list", edit("features:\n  - name: x\n    transform: zscore\n  - name: city\n"
                               "    transform: vocabulary\n    top_k: 10\n", "features: x\n"), 6, "features",
     "valid list"),
    ("bool-as-string", BASE_SPEC + "validation:\n  fail_on_anomalies: maybe\n", 20,
     "validation.fail_on_anomalies", "valid boolean"),
    ("version-string", edit("tfxd: 1", "tfxd: '1'"), 1, "tfxd", "allowed values: 1"),
    # enums
    ("bad-format", edit("format: csv", "format: cvs"), 4, "data.format", "did you mean 'csv'?"),
    ("bad-transform", edit("transform: zscore", "transform: z_score"), 8, "features[0].transform",
     "did you mean 'zscore'?"),
    ("bad-strategy", BASE_SPEC + "  strategy: mirored\n", 19, "training.strategy", "did you mean 'mirrored'?"),
    ("bad-task", edit("task: binary", "task: classification"), 15, "label.task",
     "allowed values: binary, multiclass, regression"),
    ("bad-runner", BASE_SPEC + "beam:\n  runner: dataflw\n", 20, "beam.runner", "did you mean 'dataflow'?"),
    ("bad-metric", BASE_SPEC + "model:\n  metrics: [acuracy]\n", 20, "model.metrics[0]", "did you mean 'accuracy'?"),
    ("bad-accelerator", BASE_SPEC + "targets:\n  vertex:\n    project: my-project\n    region: us-central1\n"
     "    image: img\n    root: gs://b/p\n    trainer:\n      accelerator: {type: NVIDIA_TESLA_T5}\n", 26,
     "targets.vertex.trainer.accelerator.type", "did you mean 'NVIDIA_TESLA_T4'?"),
    # out of range
    ("batch-size-zero", edit("batch_size: 32", "batch_size: 0"), 17, "training.batch_size",
     "greater than or equal to 1"),
    ("negative-top-k", edit("top_k: 10", "top_k: -1"), 11, "features[1].top_k", "greater than or equal to 0"),
    ("dropout-one", BASE_SPEC + "model:\n  dropout: 1.0\n", 20, "model.dropout", "less than 1"),
    ("split-ratio-range", edit("  path: data.csv", "  path: data.csv\n  splits: {train: 1.5, eval: -0.5}"), 6,
     "data.splits.train", "not in (0, 1]"),
    # names and patterns
    ("bad-name", edit("name: demo", "name: My_Pipeline"), 2, "name", "lowercase letters, digits and '-'"),
    ("bad-feature-name", edit("  - name: x\n", "  - name: 2x\n"), 7, "features[0].name", "letters, digits"),
    ("bad-preprocessing-fn", BASE_SPEC + "preprocessing_fn: not a path\n", 19, "preprocessing_fn",
     "package.module:function"),
    ("bad-cron", BASE_SPEC + "targets:\n  kubeflow:\n    image: img\n    schedule: {cron: '0 25 * * *'}\n", 22,
     "targets.kubeflow.schedule.cron", "hour field '25' is outside 0-23"),
    ("bad-cron-fields", BASE_SPEC + "targets:\n  kubeflow:\n    image: img\n    schedule: {cron: '0 3 * *'}\n", 22,
     "targets.kubeflow.schedule.cron", "5 fields"),
    ("bad-timezone", BASE_SPEC + "targets:\n  kubeflow:\n    image: img\n"
     "    schedule: {cron: '0 3 * * *', timezone: Mars/Base}\n", 22, "targets.kubeflow.schedule.timezone",
     "unknown time zone 'Mars/Base'"),
    ("bad-memory", BASE_SPEC + "targets:\n  kubeflow:\n    image: img\n    resources:\n"
     "      Trainer: {memory: lots}\n", 23, "targets.kubeflow.resources.Trainer.memory", "16Gi"),
    ("bad-resource-component", BASE_SPEC + "targets:\n  kubeflow:\n    image: img\n    resources:\n"
     "      Trainr: {cpu: 2}\n", 23, "targets.kubeflow.resources.Trainr", "did you mean 'Trainer'?"),
    ("vertex-root-not-gcs", BASE_SPEC + "targets:\n  vertex:\n    project: my-project\n    region: us-central1\n"
     "    image: img\n    root: /tmp/x\n", 24, "targets.vertex.root", "gs://bucket/path"),
    # missing keys
    ("missing-label", edit("label:\n  name: y\n  column: target\n  task: binary\n", ""), 1, "label",
     "add `label: ...`"),
    ("missing-version", edit("tfxd: 1\n", ""), 1, "tfxd", "add `tfxd: ...`"),
    ("missing-task", edit("  task: binary\n", ""), 12, "label.task", "add `task: ...`"),
    ("missing-vertex-fields", BASE_SPEC + "targets:\n  vertex:\n    project: my-project\n", 20,
     "targets.vertex.region", "add `region: ...`"),
    # cross-field rules
    ("splits-not-sum-1", edit("  path: data.csv", "  path: data.csv\n  splits: {train: 0.7, eval: 0.2}"), 6,
     "data.splits", "sum to 0.9"),
    ("splits-mixed", edit("  path: data.csv", "  path: data.csv\n  splits: {train: 0.8, eval: 'e*.csv'}"), 6,
     "data.splits", "mix ratios and file patterns"),
    ("splits-no-train", edit("  path: data.csv", "  path: data.csv\n  splits: {fit: 0.8, eval: 0.2}"), 6,
     "data.splits", "no `train` split"),
    ("splits-no-eval", edit("  path: data.csv", "  path: data.csv\n  splits: {train: 0.8, test: 0.2}"), 6,
     "data.splits", "no `eval` split (the Trainer validates on it and the Evaluator evaluates it)"),
    ("split-key-with-patterns", edit("  path: data.csv", "  path: data.csv\n  splits: {train: 'd*.csv', eval: 'e*.csv'}\n"
                                     "  split_key: x"), 7, "data.split_key", "only applies to ratio splits"),
    ("bigquery-without-query", edit("  format: csv\n  path: data.csv\n", "  format: bigquery\n"), 4, "data.query",
     "add `query:"),
    ("path-missing", edit("  path: data.csv\n", ""), 4, "data.path", "needs a path"),
    ("label-column-and-expr", edit("  column: target", "  column: target\n  expr: 'a > b'"), 15, "label.expr",
     "not both"),
    ("multiclass-without-num-classes", edit("task: binary", "task: multiclass"), 13, "label.num_classes",
     "multiclass labels need `num_classes`"),
    ("num-classes-not-multiclass", edit("task: binary", "task: binary\n  num_classes: 3"), 16,
     "label.num_classes", "only applies to multiclass"),
    ("steps-and-epochs", BASE_SPEC + "  epochs: 3\n", 19, "training.epochs", "not both"),
    ("duplicate-feature", edit("  - name: city", "  - name: x"), 9, "features[1].name", "listed twice"),
    ("feature-is-label", edit("  - name: city", "  - name: y"), 9, "features[1].name", "label's name"),
    ("top-k-on-zscore", edit("    transform: zscore", "    transform: zscore\n    top_k: 5"), 9,
     "features[0].top_k", "belongs to transform vocabulary"),
    ("hash-without-buckets", edit("transform: vocabulary\n    top_k: 10", "transform: hash"), 9,
     "features[1].buckets", "transform hash needs `buckets`"),
    ("categorical-without-num-buckets", edit("transform: vocabulary\n    top_k: 10", "transform: categorical"),
     9, "features[1].num_buckets", "needs `num_buckets`"),
    ("preprocessing-fn-and-features", BASE_SPEC + "preprocessing_fn: my.module:fn\n", 19, "preprocessing_fn",
     "replaces `features`"),
    ("no-features", edit("features:\n  - name: x\n    transform: zscore\n  - name: city\n"
                         "    transform: vocabulary\n    top_k: 10\n", ""), 1, "features", "no features"),
    ("cnn-without-section", BASE_SPEC + "model:\n  type: cnn\n", 20, "model.cnn", "needs a `cnn` section"),
    ("hidden-units-on-linear", BASE_SPEC + "model:\n  type: linear\n  hidden_units: [8]\n", 21,
     "model.hidden_units", "does not apply to model type linear"),
    ("custom-without-builder", BASE_SPEC + "model:\n  type: custom\n", 20, "model.builder", "needs `builder`"),
    ("metric-wrong-task", BASE_SPEC + "model:\n  metrics: [mean_absolute_error]\n", 20, "model.metrics[0]",
     "does not fit a binary label"),
    ("threshold-not-in-metrics", BASE_SPEC + "evaluation:\n  metrics: [auc]\n  thresholds:\n"
     "    binary_accuracy: {min: 0.5}\n", 22, "evaluation.thresholds.binary_accuracy", "not in evaluation.metrics"),
    ("empty-threshold", BASE_SPEC + "evaluation:\n  thresholds:\n    auc: {}\n", 21, "evaluation.thresholds.auc",
     "needs `min`, `max` or `max_drop`"),
    ("ring-on-mirrored", BASE_SPEC + "  strategy: mirrored\n  all_reduce: ring\n", 20, "training.all_reduce",
     "multi-worker collective"),
    ("bad-expression-call", edit("  column: target", "  expr: \"__import__('os')\""), 14, "label.expr",
     "at column 1"),
    ("bad-expression-attribute", edit("  column: target", "  expr: 'fare.real > 1'"), 14, "label.expr",
     "attribute access"),
    ("feature-fill-list", edit("    transform: zscore", "    transform: zscore\n    fill: [1]"), 9,
     "features[0].fill", "valid"),
    # the file itself
    ("yaml-syntax", edit("  batch_size: 32", "  batch_size: [32"), 18, "(syntax)", "not valid YAML"),
    ("yaml-tab", edit("  batch_size: 32", "\tbatch_size: 32"), 17, "(syntax)", "not allow tabs"),
    ("duplicate-key", edit("  steps: 10", "  steps: 10\n  steps: 20"), 19, "training.steps",
     "key 'steps' appears twice in the same mapping (lines 18 and 19)"),
    ("duplicate-key-in-a-list", edit("    top_k: 10", "    top_k: 10\n    top_k: 20"), 12, "features[1].top_k",
     "key 'top_k' appears twice in the same mapping (lines 11 and 12)"),
    ("python-tag", edit("  column: target", "  column: !!python/object/apply:os.system ['true']"), 14,
     "label.column", "YAML tags are not allowed"),
    ("top-level-list", "- tfxd: 1\n", 1, "(top level)", "mapping of keys"),
    ("empty-file", "", 1, "(top level)", "the spec is empty"),
    ("unset-variable", edit("  path: data.csv", "  path: ${TFXD_TEST_SURELY_UNSET}"), 5, "data.path",
     "TFXD_TEST_SURELY_UNSET is not set"),
    ("data-path-missing-file", edit("path: data.csv", "path: nowhere.csv"), 5, "data.path", "does not exist"),
    ("data-glob-matches-nothing", edit("path: data.csv", "path: 'parts/*.csv'"), 5, "data.path",
     "no file matches"),
    ("schema-file-missing", BASE_SPEC + "validation:\n  schema: missing/schema.pbtxt\n", 20,
     "validation.schema", "does not exist"),
    ("spec-not-utf8", b"tfxd: 1\nname: d\xe9mo\n", 1, "(file)", "not UTF-8 text"),
    ("spec-is-a-directory", DIRECTORY, 1, "(file)", "is a directory"),
    # YAML tags: none constructs anything
    ("python-object-tag", BASE_SPEC + "extra: !!python/object:os.system x\n", 19, "extra",
     "YAML tags are not allowed"),
    ("python-name-tag", edit("  column: target", "  column: !!python/name:os.system"), 14, "label.column",
     "YAML tags are not allowed"),
    ("custom-tag", edit("  steps: 10", "  steps: !ten 10"), 18, "training.steps", "YAML tags are not allowed"),
    # more wrong values, deeper keys and contradictions
    ("empty-name", edit("name: demo", "name:"), 2, "name", "valid string"),
    ("very-long-name", edit("name: demo", "name: " + "a" * 200), 2, "name", "(200 characters)"),
    ("negative-learning-rate", BASE_SPEC + "model:\n  optimizer: {name: adam, learning_rate: -1}\n", 20,
     "model.optimizer.learning_rate", "greater than 0"),
    ("eval-steps-zero", BASE_SPEC + "  eval_steps: 0\n", 19, "training.eval_steps", "greater than or equal to 1"),
    ("negative-seed", BASE_SPEC + "  seed: -3\n", 19, "training.seed", "greater than or equal to 0"),
    ("negative-beam-workers", BASE_SPEC + "beam:\n  workers: -1\n", 20, "beam.workers",
     "greater than or equal to 0"),
    ("negative-patience", BASE_SPEC + "  callbacks: {early_stopping: {patience: -2}}\n", 19,
     "training.callbacks.early_stopping.patience", "greater than or equal to 0"),
    ("unknown-threshold-key", BASE_SPEC + "evaluation:\n  thresholds:\n    auc: {minimum: 0.5}\n", 21,
     "evaluation.thresholds.auc.minimum", "allowed keys here: min, max, max_drop"),
    ("threshold-min-above-max", BASE_SPEC + "evaluation:\n  thresholds:\n    auc: {min: 0.9, max: 0.5}\n", 21,
     "evaluation.thresholds.auc.min", "swap them"),
    ("count-threshold-not-whole", BASE_SPEC + "evaluation:\n  metrics: [auc, example_count]\n  thresholds:\n"
     "    example_count: {min: 2.5}\n", 22, "evaluation.thresholds.example_count.min",
     "example_count is a count, so min 2.5 is not a whole number"),
    ("max-drop-beyond-range", BASE_SPEC + "evaluation:\n  thresholds:\n    auc: {max_drop: 1.5}\n", 21,
     "evaluation.thresholds.auc.max_drop", "a max_drop of 1.5 lets every model pass"),
    ("cpu-not-positive", BASE_SPEC + "targets:\n  kubeflow:\n    image: gcr.io/p/i:1\n    root: gs://b/r\n"
     "    resources: {Trainer: {cpu: -1}}\n", 23, "targets.kubeflow.resources.Trainer.cpu", "greater than 0"),
    ("kubeflow-without-image", BASE_SPEC + "targets:\n  kubeflow: {host: 'http://x'}\n", 20,
     "targets.kubeflow.image", "add `image: ...`"),
    ("unset-variable-in-target", BASE_SPEC + "targets:\n  kubeflow:\n    image: ${TFXD_TEST_UNSET_IMAGE}\n", 21,
     "targets.kubeflow.image", "TFXD_TEST_UNSET_IMAGE is not set"),
    ("malformed-variable", edit("  path: data.csv", "  path: ${data"), 5, "data.path",
     "malformed variable reference"),
    ("vertex-bad-timezone", BASE_SPEC + "targets:\n  vertex:\n    project: my-project\n    region: us-central1\n"
     "    image: img\n    root: gs://bucket/p\n    schedule: {cron: '0 3 * * *', timezone: Europe/Nowhere}\n",
     25, "targets.vertex.schedule.timezone", "unknown time zone 'Europe/Nowhere'"),
    ("cron-shorthand", BASE_SPEC + "targets:\n  kubeflow:\n    image: img\n    schedule: {cron: '@hourly'}\n", 22,
     "targets.kubeflow.schedule.cron", "5 fields"),
    ("expression-syntax", edit("  column: target", "  expr: 'x >'"), 14, "label.expr", "not a valid expression"),
    ("expression-unknown-function", edit("  column: target", "  expr: 'sqrtt(x) > 1'"), 14, "label.expr",
     "function 'sqrtt' cannot be called"),
    ("slice-column-missing", BASE_SPEC + "evaluation:\n  slices: [[], [xx]]\n", 20, "evaluation.slices[1][0]",
     "slice column 'xx' is not a column of data.csv"),
    ("feature-expr-column-missing", edit("    transform: zscore", "    expr: 'x * cty'\n    transform: zscore"), 8,
     "features[0].expr", "column 'cty' is not a column of data.csv"),
    # spans in data.path (tfxd.spans)
    ("span-date-width", edit("path: data.csv", "path: 'd/{YYYY:4}-{MM}-{DD}.csv'"), 5, "data.path",
     "a date placeholder takes no width"),
    ("span-unknown-placeholder", edit("path: data.csv", "path: 'd/{DATE}/x.csv'"), 5, "data.path",
     "{DATE} in d/{DATE}/x.csv is not a placeholder"),
    ("span-no-data", edit("path: data.csv", "path: 'days/{YYYY}-{MM}-{DD}.csv'"), 5, "data.path",
     "no data matches"),
    ("spans-without-placeholders", edit("  path: data.csv\n", "  path: data.csv\n  spans: {window: 3}\n"), 6,
     "data.spans", "data.spans needs spans in the path"),
    ("spans-window-and-span", edit("  path: data.csv\n", "  path: 'd/{SPAN}.csv'\n  spans: {window: 3, span: 4}\n"),
     6, "data.spans", "takes `window: N` or `span: VALUE`, one of them"),
    ("spans-window-zero", edit("  path: data.csv\n", "  path: 'd/{SPAN}.csv'\n  spans: {window: 0}\n"), 6,
     "data.spans.window", "greater than or equal to 1"),
    ("spans-offset-not-scheduled", edit("  path: data.csv\n", "  path: 'd/{YYYY}{MM}{DD}.csv'\n  spans:\n"
                                        "    span: 2026-11-23\n    offset_days: -1\n"), 8,
     "data.spans.offset_days", "applies to `span: scheduled` only"),
    # buckets: gs:// alone has a file system in TFX 1.16's stack (pipeline/spec/load.py, _check_schemes)
    ("s3-data", edit("path: data.csv", "path: s3://mlpipeline/data.csv"), 5, "data.path",
     "s3:// is not a file system tfxd can read or write"),
    ("s3-root", "root: s3://mlpipeline/runs\n" + BASE_SPEC, 1, "root", "without tensorflow-io"),
    ("spans-scheduled-needs-a-date", edit("  path: data.csv\n", "  path: 'd/{SPAN}.csv'\n  spans: {span: scheduled}\n"),
     6, "data.spans.span", "reads the scheduled date, and the path has {SPAN}"),
    ("spans-split-patterns-past-the-span", edit("  path: data.csv\n", "  path: 'd/{SPAN}/*.csv'\n  splits: "
                                               "{train: 'train/*', eval: 'eval/*'}\n"), 5, "data.path",
     "with file-pattern splits, data.path ends at the span's folder"),
    ("drift-without-spans", BASE_SPEC + "validation:\n  drift: {threshold: 0.2}\n", 20, "validation.drift",
     "compares each span of the data with the previous one, and data.path has no spans"),
    ("drift-threshold-above-one", BASE_SPEC + "validation:\n  drift:\n    threshold: 1.5\n", 21,
     "validation.drift.threshold", "less than or equal to 1"),
    ("drift-column-threshold", edit("  path: data.csv\n", "  path: 'd/{SPAN}.csv'\n") + "validation:\n  drift:\n"
     "    features: {x: 0}\n", 21, "validation.drift.features.x", "threshold 0.0 is not in (0, 1]"),
    ("spans-span-not-a-date", edit("  path: data.csv\n", "  path: 'd/{YYYY}-{MM}-{DD}'\n  spans: {span: 42}\n"), 6,
     "data.spans.span", "span '42' is not a date YYYY-MM-DD"),
]


@pytest.mark.reliability("bad spec")
@pytest.mark.parametrize(("text", "line", "path", "needle"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_wrong_spec_is_refused_with_position_path_and_hint(project, text, line, path, needle):
    if text is DIRECTORY:
        spec = project / "spec.yaml"
        spec.mkdir()
    elif isinstance(text, bytes):
        spec = project / "spec.yaml"
        spec.write_bytes(text)
    else:
        spec = write_spec(project, text)
    before = sorted(str(p.relative_to(project)) for p in project.rglob("*"))
    result = run_cli("validate", str(spec))
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    match = re.search(rf"{re.escape(str(spec))}:(\d+):(\d+): {re.escape(path)}: ", result.output)
    assert match, result.output
    assert int(match.group(1)) == line, result.output
    if isinstance(text, str) and line <= len(text.splitlines()):  # the column points at a key or value there
        shown = text.splitlines()[line - 1]
        column = int(match.group(2))
        # at a token, or just past the line's end where a value is missing (`name:`)
        assert column in (1, len(shown) + 1) or shown[column - 1:column].strip(), (shown, column, result.output)
    assert needle in result.output
    assert "\n    hint: " in result.output, result.output
    assert "nothing was written" in result.output
    for verb in (("run",), ("compile", "--target", "kubeflow", "-o", str(project / "out.yaml"))):  # verbs that write
        refused = run_cli(*verb, str(spec))
        assert refused.exit_code == 2 and "Traceback" not in refused.output, (verb, refused.output)
    assert sorted(str(p.relative_to(project)) for p in project.rglob("*")) == before


def test_enough_wrong_specs():
    assert len(CASES) >= 60 and len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.reliability("bad spec")
def test_every_problem_is_reported_at_once(project):
    text = edit("batch_size: 32", "batch_size: 0").replace("format: csv", "format: cvs") + "extra: 1\n"
    result = run_cli("validate", str(write_spec(project, text)))
    assert result.exit_code == 2
    for path in ("data.format", "training.batch_size", "extra"):
        assert f": {path}: " in result.output
    assert "3 problems found" in result.output


@pytest.mark.reliability("bad spec")
def test_expression_error_names_the_column(project):
    result = run_cli("validate", str(write_spec(project, edit("  column: target", "  expr: 'fare + x[0]'"))))
    assert result.exit_code == 2
    assert "subscripting" in result.output and "column 8" in result.output


@pytest.mark.reliability("bad spec")
def test_set_error_points_at_the_command_line(project):
    result = run_cli("validate", str(write_spec(project, BASE_SPEC)), "--set", "training.steps=lots")
    assert result.exit_code == 2
    assert "--set training.steps=lots:1:16: training.steps: input should be a valid integer" in result.output


@pytest.mark.reliability("bad spec")
def test_malformed_set_is_a_usage_error(project):
    result = run_cli("validate", str(write_spec(project, BASE_SPEC)), "--set", "training.steps")
    assert result.exit_code == 2
    assert "expected key.path=value" in result.output


@pytest.mark.reliability("bad spec")
def test_target_must_exist(project):
    result = run_cli("validate", str(write_spec(project, BASE_SPEC)), "--target", "vertex")
    assert result.exit_code == 2
    assert "no `targets.vertex` section" in result.output


@pytest.mark.reliability("bad spec")
def test_parameter_server_needs_parameter_servers_on_the_target(project):
    spec = write_spec(project, BASE_SPEC + "  strategy: parameter_server\n")
    result = run_cli("validate", str(spec), "--target", "local")
    assert result.exit_code == 2
    assert ":19:" in result.output and "targets.local.trainer has none" in result.output


@pytest.mark.reliability("bad spec")
def test_replicas_on_hosts_of_their_own_cannot_reach_a_bucket(project):
    """They reach each other only (components/trainer/replica_hosts.py); on local paths they are fine."""
    text = BASE_SPEC + "targets:\n  local:\n    trainer: {workers: 2, network: hosts}\n"
    on_bucket = run_cli("validate", str(write_spec(project, text + "root: gs://runs/demo\n")), "--target", "local")
    assert on_bucket.exit_code == 2, on_bucket.output
    assert "targets.local.trainer.network: replicas on hosts of their own reach only each other, not a bucket: " \
           "they could not read or write gs://runs/demo, gs://runs/demo/serving" in " ".join(on_bucket.output.split())
    assert "use network: loopback" in on_bucket.output
    assert run_cli("validate", str(write_spec(project, text)), "--target", "local").exit_code == 0


@pytest.mark.reliability("bad spec")
def test_missing_spec_file(project):
    result = run_cli("validate", str(project / "nope.yaml"))
    assert result.exit_code == 2
    assert "nope.yaml:1:1: (file): no such file" in result.output


@pytest.mark.reliability("bad spec")
@pytest.mark.parametrize(("old", "new", "line", "path", "needle"), [
    ("  - name: x\n", "  - name: xx\n", 7, "features[0].name", "did you mean 'x'?"),
    ("  column: target", "  column: targt", 14, "label.column", "did you mean 'target'?"),
    ("  column: target", "  expr: 'x > treshold'", 14, "label.expr", "column 'treshold' is not a column of data.csv"),
    ("  path: data.csv", "  path: data.csv\n  split_key: idd", 6, "data.split_key", "the data has: x, city, target"),
])
def test_columns_are_checked_against_the_csv_header(project, old, new, line, path, needle):
    result = run_cli("validate", str(write_spec(project, edit(old, new))))
    assert result.exit_code == 2, result.output
    assert re.search(rf":{line}:\d+: {re.escape(path)}: ", result.output), result.output
    assert needle in result.output


@pytest.mark.reliability("bad spec")
@pytest.mark.parametrize(("beam", "path", "needle"), [
    ("beam: {runner: direct, master: x}\n", "beam.master", "does not apply to runner direct"),
    ("beam: {runner: direct, job_endpoint: 'h:8099'}\n", "beam.job_endpoint", "does not apply to runner direct"),
    ("beam: {runner: flink, master: 'h:8081', job_endpoint: 'h:8099'}\n", "beam.master", "already knows"),
    ("beam: {runner: flink, job_endpoint: 'http://h:8099'}\n", "beam.job_endpoint", "host:port"),
    ("beam: {runner: spark, master: 'h:7077'}\n", "beam.master", "not a standalone master URL"),
    ("beam: {runner: dataflow, workers: 3}\n", "beam.workers", "--max_num_workers"),
    ("beam: {runner: flink, args: ['--parallelism=4']}\n", "beam.args", "set beam.workers: N and remove --parallelism"),
    ("beam: {runner: dataflow}\n", "beam.runner", "takes its project, region, image"),
    ("beam: {runner: flink}\ntargets: {kubeflow: {image: 'img:1'}}\n", "beam.runner",
     "on kubeflow each Beam step submits to a Beam Flink job server in the cluster, and the spec names none"),
])
def test_beam_profile_rules(project, beam, path, needle):
    target = ("--target", "kubeflow") if "kubeflow" in beam else ()
    result = run_cli("validate", str(write_spec(project, BASE_SPEC + beam)), *target)
    assert result.exit_code == 2
    assert f": {path}: " in result.output and needle in result.output


@pytest.mark.parametrize("verb", [("validate",), ("run",), ("compile", "--target", "vertex"), ("render",)])
def test_no_yaml_tag_constructs_anything(project, verb):
    marker = project / "constructed"
    spec = write_spec(project, edit("  column: target",
                                    f"  column: !!python/object/apply:os.system ['touch {marker}']"))
    result = run_cli(*verb, str(spec))
    assert result.exit_code == 2 and "YAML tags are not allowed" in result.output
    assert not marker.exists()
