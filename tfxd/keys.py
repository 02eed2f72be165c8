"""The names that cross rooms: one writes them, another reads them, and both take them from here.

Artifact custom properties, custom_config keys and the files tfxd leaves beside TFX's artifacts. A
name used inside one component only (an execution property its component and executor share) stays
in that component.
"""

from __future__ import annotations

# ExampleGen's examples artifact: JSON {split: count} and {reason: count} of the records skipped under
# `bad_records: skip`. Transform carries the split counts on to its transformed examples, from which the
# Trainer takes the train split's size; the run summary reports both.
SPLIT_COUNTS_PROPERTY = "tfxd_split_counts"
BAD_RECORDS_PROPERTY = "tfxd_bad_records"
# With spans in data.path: JSON list of the spans read, as they read in the path (2026-11-23, or 42).
# Transform carries it on; the Trainer records it beside the model (tfxd.pushed.DATA_RECORD_FILE).
SPANS_PROPERTY = "tfxd_spans"
# The same artifact, with spans: 1 when its spans are new (not the ones the latest blessed model was trained
# on), else 0 and NO_NEW_DATA_PROPERTY the reason. The pipeline's condition (pipeline/assembly/dag.py) reads
# it, on the local runners and, compiled into each task's trigger policy, on Kubeflow and Vertex.
NEW_DATA_PROPERTY = "tfxd_new_data"
NO_NEW_DATA_PROPERTY = "tfxd_no_new_data"
# With `span: scheduled`: JSON {day, why}, the day read and where it came from (the schedule time, a local
# run's start, or the run's creation under `unscheduled: creation_time`).
SPAN_DAY_PROPERTY = "tfxd_span_day"
# ExampleValidator's anomalies artifact, with validation.drift: JSON {span, previous_span, columns: {column:
# {distance, threshold, measure}}, beyond: the columns past their threshold}. The run summary reports it.
DRIFT_PROPERTY = "tfxd_drift"
# ExampleGen's examples artifact, with validation.drift: JSON {newest, previous}, the span the gate judges and
# the newest span present before it (None for the first), whichever spans the run read. Where the drift store
# (DRIFT_STATISTICS_FILE under <store>/<span>/) lacks one's train statistics, ExampleGen writes that span's
# train examples under <examples>/DRIFT_EXAMPLES_DIR/<span>/ and ExampleValidator computes them from there.
DRIFT_SPANS_PROPERTY = "tfxd_drift_spans"
DRIFT_STATISTICS_FILE = "FeatureStats.pb"
DRIFT_EXAMPLES_DIR = "tfxd_drift"
# The same artifact, with validation.skew: JSON {columns: {column: {distance, threshold, measure}}, beyond},
# the train split against the eval split.
SKEW_PROPERTY = "tfxd_skew"
# The line ExampleValidator logs when a gate stops the run (validation.<gate>.action: fail), before it raises
# (its outputs are then never published): the marker, then JSON {gate, message, and the gate's record as
# above}. The run's summary reads it from the log, locally and in a replay, so that it says why it stopped.
GATE_VERDICT = "tfxd gate stopped the run: "

# Transform's custom_config, written by pipeline.assembly: the spec's features and label, every default
# filled in. The generic preprocessing_fn compiles them; the feature description reads them.
FEATURES = "features"
LABEL = "label"

# Beside the transform graph (Transform writes it, the Trainer reads it): what each transformed feature
# is (float, id with its cardinality, string), its shape, and the label's task and classes.
FEATURE_INFO_FILE = "tfxd_features.json"


class TrainerConfig:
    """Keys of the Trainer's custom_config (tfxd.trainer_config.TrainerCustomConfig writes and reads it).
    pipeline.assembly writes SPEC, LOCAL_CLUSTER, LABEL_ONLY and OPERATOR_JOB; the Trainer executor adds
    TRAIN_EXAMPLES, BACKUP_DIR and SPANS at run time; run_fn reads them all."""

    SPEC = "spec"  # the resolved spec's Trainer sections, as a dict
    LOCAL_CLUSTER = "local_cluster"  # targets.local.trainer ({workers, parameter_servers}) or None
    LABEL_ONLY = "label_only_columns"  # columns only the label reads: a serving request has none of them
    TRAIN_EXAMPLES = "train_examples"  # the train split's size, for `training.epochs`
    BACKUP_DIR = "backup_dir"  # BackupAndRestore's folder, the same for a retry of the same training
    OPERATOR_JOB = "operator_job"  # targets.kubeflow.trainer as the launcher reads it (components/trainer/job_launch.py)
    SPANS = "spans"  # the spans the examples came from (keys.SPANS_PROPERTY), recorded beside the model


class TFJob:
    """The Training Operator's names for a TFJob (kubeflow/training-operator v1.9, pkg/apis/kubeflow.org/v1):
    the launcher (components/trainer/) writes and watches them, replay's stand-in operator serves them."""

    GROUP = "kubeflow.org"
    VERSION = "v1"
    PLURAL = "tfjobs"
    KIND = "TFJob"
    CONTAINER = "tensorflow"  # the operator's default container: it gets the port and TF_CONFIG
    # the labels the operator puts on every replica pod (common_types.go)
    JOB_NAME_LABEL = "training.kubeflow.org/job-name"
    REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
    REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"


class TrainJob:
    """Kubeflow Trainer v2's names for a TrainJob on tfxd's TensorFlow runtime (kubeflow/trainer v2.3,
    pkg/apis/trainer/v1alpha1 and pkg/constants; JobSet v0.12, api/jobset/v1alpha2): the launcher
    (components/trainer/) writes and watches them, the runtime (kubeflow/trainjob-runtime.yaml) and replay's
    stand-in serve them, each replica's cluster normalisation (trainer_module/cluster.py) reads them."""

    GROUP = "trainer.kubeflow.org"
    VERSION = "v1alpha1"
    PLURAL = "trainjobs"
    KIND = "TrainJob"
    RUNTIME_KIND = "ClusterTrainingRuntime"
    RUNTIME = "tfxd-tensorflow"  # the ClusterTrainingRuntime tfxd ships (kubeflow/trainjob-runtime.yaml)
    CONTAINER = "node"  # the trainer's container: Trainer v2 sets its image, command, args and env
    REPLICATED_JOB = "node"  # the runtime's one replicated job: every node of the TensorFlow cluster
    PORT = 2222
    # JobSet's labels on every pod (jobset_types.go), which the runtime hands each node as environment
    JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
    REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
    JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
    COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"  # the Job controller's, per pod
    # the Job controller's count of an index's failed pods, on each new pod (backoffLimitPerIndex)
    INDEX_FAILURES_ANNOTATION = "batch.kubernetes.io/job-index-failure-count"
    # each node's environment: the runtime's downward API (from the labels above), the Job controller's
    # completion index, and the TrainJob's trainer.env (the cluster's shape, which no label carries)
    JOBSET_NAME_ENV = "TFXD_JOBSET_NAME"
    REPLICATED_JOB_ENV = "TFXD_REPLICATED_JOB"
    JOB_INDEX_ENV = "TFXD_JOB_INDEX"
    COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"
    INDEX_FAILURES_ENV = "TFXD_INDEX_FAILURES"
    NODES_ENV = "TFXD_TRAINJOB_NODES"
    PARAMETER_SERVERS_ENV = "TFXD_TRAINJOB_PARAMETER_SERVERS"


# The exported model's signatures: serving on serialized raw tf.Examples, and the transform graph alone,
# through which the Evaluator reads the label and the features from raw examples.
SERVING_SIGNATURE = "serving_default"
TRANSFORM_FEATURES_SIGNATURE = "transform_features"

# Beside the model artifact's Format-Serving folder (the chief's run_fn writes it, the run summary reads
# it): the plan, the final metrics and the per-epoch history.
TRAINING_REPORT_FILE = "tfxd_training.json"

# ExampleGen's execution properties that others fill: the reader config pipeline.assembly writes; a span
# overriding data.spans (the compiled pipeline's `span` parameter); and the schedule's and the run's creation
# times, which kubeflow/compile.py fills with the cluster's placeholders, for `{span: scheduled}` and
# `unscheduled: creation_time`.
READER_CONFIG_KEY = "reader_config"
SPAN_KEY = "tfxd_span"
SCHEDULE_TIME_KEY = "tfxd_schedule_time"
CREATE_TIME_KEY = "tfxd_create_time"

# The launchers that run a Trainer's replicas outside its pipeline task: a target's section names the one it
# needs (pipeline.spec.targets: TargetSection.trainer_launcher), pipeline/assembly/dag.py maps it to a Trainer.
OPERATOR_JOB_LAUNCHER = "operator_job"
VERTEX_JOB_LAUNCHER = "vertex_custom_job"
# Their executors' class paths, as the compiled files name them: replay runs those Trainer tasks against its
# local operators and Vertex stand-in, and tells them by name without importing them (the Kubernetes client,
# aiplatform, every TFX component: seconds of every replay's start; tests/kubeflow/test_replay_names.py).
OPERATOR_JOB_EXECUTOR = "tfxd.components.trainer.job_launch.OperatorExecutor"
VERTEX_JOB_EXECUTOR = "tfxd.components.trainer.vertex_job.Executor"

# The functions TFX loads by name inside the Transform and Trainer executors (pipeline.assembly names them).
PREPROCESSING_FN = "tfxd.components.transform.preprocessing.preprocessing_fn"
RUN_FN = "tfxd.trainer_module.run_fn.run_fn"

# The pipeline's resolver nodes (pipeline.assembly gives the ids; kubeflow/compile.py keeps them uncached):
# the latest blessed model the Evaluator compares with, and with training.warm_start the Trainer's base_model.
RESOLVER = "latest_blessed_model_resolver"
WARM_START_RESOLVER = "warm_start_model_resolver"

# Where kubeflow/Dockerfile copies the user's project in the pipeline image: a spec's relative paths are
# placed under it on a cluster (pipeline.spec.placement), and replay maps it back to the project's folder.
IMAGE_PROJECT_DIR = "/tfxd/project"

# Environment variables one process sets for another. LOG_DIR_ENV: set by `tfxd run`, where the local
# Trainer's worker processes write their logs. ADDRESSES_ENV: JSON {host:port: host:port}, the addresses of
# TF_CONFIG mapped to where the tasks really listen (replay's loopback ports); trainer_module/cluster.py
# applies it.
LOG_DIR_ENV = "TFXD_TRAINER_LOG_DIR"
ADDRESSES_ENV = "TFXD_CLUSTER_ADDRESSES"

# Every run of a pipeline on one page, in its root beside runs/ (pipeline/report/history_page.py), rewritten
# by each `tfxd run` and linked from each report.html (runs/<run id>/report.html -> ../../HISTORY_PAGE).
HISTORY_PAGE = "history.html"

# What each task of a compiled pipeline leaves in its run's folder of the pipeline root, on the cluster and in a
# replay (components/cluster_task.py writes it, pipeline/run/cluster_history.py reads it): `<run folder>/
# TASK_RECORDS/<task>.json`, the run folder being the one every task's output artifacts go under
# (`<root>/<pipeline>/<run id>` on Kubeflow Pipelines, `<root>/<project number>/<job id>` on Vertex).
TASK_RECORDS = "tfxd-records"
# The compiled containers' entry point (kubeflow/compile.py writes it, the pipeline image has it) and its own
# arguments, before TFX's: whose record it writes.
TASK_ENTRY_POINT = "tfxd.components.cluster_task"
TASK_PIPELINE_ARG = "--tfxd_pipeline"
# The compiled pipeline's exit task (kubeflow/compile.py) and its entry point: it rewrites history.html from the
# records whatever the run's end.
HISTORY_TASK = "HistoryPage"
HISTORY_ENTRY_POINT = "tfxd.kubeflow.history_task"
TASK_NAME_ARG = "--tfxd_task"
# The evaluation artifact's overall-slice metrics, as JSON {name: value} (the Evaluator's executor sets it),
# so that a run on a cluster says its metrics without TFMA reading the evaluation back.
METRICS_PROPERTY = "tfxd_metrics"
# The evaluation's slice of every example, as a run's summary and the metrics property name it
# (components/evaluator/slices.py).
OVERALL_SLICE = "Overall"
