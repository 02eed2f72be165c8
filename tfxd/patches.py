"""Every attribute of a library that tfxd replaces, in one table: what it replaces, in which library and
version it was written against, and what goes wrong without it.

tfxd mends a few things in TFX, tf.Transform, Beam, TensorFlow, tf_keras and aiplatform, most of them
private (a Transform's analysis, a run's pipelines, AutoGraph's rules, Keras's steps, aiplatform's
process-wide settings). A mend is made only through this table (``applied`` for a block, ``assigned``
for good), so none exists outside it, and tests/tfxd/test_patches.py fails when an installed library's
version differs from the one a patch names: an upgrade re-checks each patch, its target still there and
its reason still true.
A patch applies while a run or an executor runs, never while a pipeline is built.
"""

from __future__ import annotations

import contextlib
import pkgutil
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

_ABSENT = object()


@dataclass(frozen=True)
class Patch:
    """One mend. ``library`` is the distribution (as ``importlib.metadata`` names it) whose code the patch
    was written against, ``version`` its version then; ``targets`` the attributes it replaces, each
    ``module:attribute`` (``module:Class.attribute`` for a class's or an object's); ``without`` what goes
    wrong without it."""

    id: str
    library: str
    version: str
    targets: tuple[str, ...]
    without: str

    def target(self, name: str | None = None) -> str:
        """The target whose attribute is ``name``, or that is ``name`` (None: the patch's only target)."""
        chosen = [target for target in self.targets
                  if name in (None, target, target.partition(":")[2].rpartition(".")[2])]
        if len(chosen) != 1:
            raise LookupError(f"patch {self.id} has no single target named {name!r}: {', '.join(self.targets)}")
        return chosen[0]

    @contextlib.contextmanager
    def applied(self, value: Any, name: str | None = None) -> Iterator[Any]:
        """The target (``name``: of several) is ``value`` in the block, which gets what it was (as
        ``getattr`` reads it). The owner's own entry is put back as it was, a class's descriptor (a
        classmethod, a staticmethod) included; an attribute the owner only inherited is removed again."""
        owner, attribute = owner_of(self.target(name))
        original = vars(owner).get(attribute, _ABSENT)
        before = getattr(owner, attribute)
        setattr(owner, attribute, value)
        try:
            yield before
        finally:
            if original is _ABSENT:
                delattr(owner, attribute)
            else:
                setattr(owner, attribute, original)

    def assigned(self, value: Any, name: str | None = None) -> None:
        """The target (``name``: of several, None: every target) is ``value`` from now on."""
        for target in self.targets if name is None else (self.target(name),):
            owner, attribute = owner_of(target)
            setattr(owner, attribute, value)


def owner_of(target: str) -> tuple[Any, str]:
    """``module:path.attribute`` -> (the object at ``module:path``, or the module, imported; ``attribute``)."""
    module, _, path = target.partition(":")
    owner_path, _, attribute = path.rpartition(".")
    return pkgutil.resolve_name(f"{module}:{owner_path}" if owner_path else module), attribute


_TRANSFORM, _TFX, _BEAM = ("tensorflow-transform", "1.16.0"), ("tfx", "1.16.0"), ("apache-beam", "2.74.0")

PATCHES: tuple[Patch, ...] = (
    Patch("transform.deep_copy_off", *_TRANSFORM,
          ("tensorflow_transform.beam.context:Context.get_use_deep_copy_optimization",),
          "tf.Transform's deep-copy optimization (inputs read again for a second analysis phase) builds Beam "
          "AppliedPTransforms with a signature Beam 2.74 no longer accepts: any preprocessing_fn with dependent "
          "analyzers (a fill by the mean, then a z-score) fails. Off, the results are the same."),
    Patch("transform.one_inspection_trace", *_TRANSFORM,
          ("tensorflow_transform.impl_helper:trace_preprocessing_function",
           "tensorflow_transform:get_analyze_input_columns", "tensorflow_transform:get_transform_input_columns"),
          "TFX's Transform executor asks which columns the analyzers read, twice (to fail fast, then in "
          "_RunBeamImpl), then which the transform reads: each ask traces the whole preprocessing_fn again."),
    Patch("transform.no_cache_inspection", *_TRANSFORM,
          ("tensorflow_transform.beam.analysis_graph_builder:get_analysis_cache_entry_keys",),
          "Without an analyzer cache TFX still traces the preprocessing_fn and builds its analysis graph once "
          "more to list the cache's keys (tfx/components/transform/executor.py, _OptimizeRun): a trace for "
          "telemetry's stage count and a cache there is not."),
    Patch("transform.whole_graph_when_all_fed", *_TRANSFORM,
          ("tensorflow_transform.saved.saved_transform_io_v2:SavedModelLoader._apply_v1_transform_model_in_v2",),
          "tf.Transform applies a TF1 transform graph (tfxd's own preprocessing_fn runs in TF1 graph mode) by "
          "pruning it to the inputs fed at every call, a copy of the graph op by op in Python "
          "(wrap_function.prune): about 0.15 s of the taxi Trainer's export for the transform_features "
          "signature, which feeds every input and fetches every output, the whole graph as loaded. "
          "trainer_module/export.py calls the loaded graph itself there, and prunes as before otherwise."),
    Patch("transform.batched_writes", *_TFX,
          ("tfx.components.transform.executor:TransformProcessor._EncodeAndWrite",),
          "TFX's writer hands Beam's TFRecord sink one transformed example at a time; tfxd's "
          "(components/transform/transformed_files.py) writes a batch at a time at gzip's fastest level."),
    Patch("tfx_bsl.batched_reads", "tfx-bsl", "1.16.1",
          ("tfx_bsl.tfxio.tf_example_record:TFExampleRecord.BeamSource",),
          "Transform, StatisticsGen and the Evaluator read every example one record at a time through Beam's "
          "TFRecord source and BatchElements, a Beam element and a Python call chain per record before tfx_bsl "
          "decodes them a list at a time; tfxd/example_files.py hands the decoder the same lists read a file "
          "at a time."),
    Patch("tfma.result_files", "tensorflow_model_analysis", "0.47.1",
          ("tensorflow_model_analysis.writers.metrics_plots_and_validations_writer:beam",
           "tensorflow_model_analysis.writers.eval_config_writer:beam"),
          "TFMA writes each of its five results (a record a slice) with Beam's sharded WriteToTFRecord or "
          "WriteToText, about six stages each: some 30 of the taxi Evaluator's 35 stages, each ~10 ms on the "
          "in-process runner; components/evaluator/result_files.py writes each in one stage, the same files."),
    Patch("tfma.signatures_by_name", "tensorflow_model_analysis", "0.47.1",
          ("tensorflow_model_analysis.utils.model_util:get_callable",),
          "TFMA calls a loaded model's signature with the batch as a positional argument; TensorFlow takes "
          "keyword arguments only there, builds a TypeError whose message is the repr of every example, then "
          "falls back to the flat call: about a tenth of the Evaluator's worker time "
          "(components/evaluator/signature_calls.py)."),
    Patch("tfma.rouge_deferred", "tensorflow_model_analysis", "0.47.1",
          ("tensorflow_model_analysis.metrics.rouge:__getattr__", "tensorflow_model_analysis.metrics.rouge:__dir__",
           "tensorflow_model_analysis.metrics.metric_types:registered_metrics",
           "tensorflow_model_analysis.metrics.metric_types:is_registered_metric"),
          "tensorflow_model_analysis/metrics/__init__.py imports its Rouge metric's module, which imports NLTK "
          "(and through it scikit-learn) and rouge_score: 0.28 s of every process that imports TFMA, which "
          "TFX's component specs do, for a text metric no tfxd spec asks for. tfxd/deferred_imports.py runs "
          "the module when one of its names or the Rouge class is first asked for."),
    Patch("tfma.views_deferred", "tensorflow_model_analysis", "0.47.1",
          ("tensorflow_model_analysis.view:__getattr__", "tensorflow_model_analysis.view:__dir__"),
          "TFMA's __init__ imports its view package, whose widget views import Jupyter's widgets (ipywidgets, "
          "and through them IPython's shell): every process that imports TFMA, which TFX's component specs "
          "do, for views only a notebook renders. tfxd/deferred_imports.py runs the package's __init__ when "
          "one of its names other than a submodule is first read."),
    Patch("ipython.init_deferred", "ipython", "7.34.0", ("IPython:__getattr__", "IPython:__dir__"),
          "TFDV's display_util imports IPython.display, and with it IPython's package __init__ (its terminal "
          "shell, prompt_toolkit, jedi): about 0.25 s of every process that imports TFDV, for a notebook's "
          "display no tfxd process calls. tfxd/deferred_imports.py runs the __init__ when one of the "
          "package's names is first read; IPython.display imports without it, and get_ipython, which Beam "
          "calls at every pipeline's run and which imports IPython's shell at each call, answers None "
          "without it while that module is not imported."),
    Patch("pubsub.init_deferred", "google-cloud-pubsub", "2.36.0",
          ("google.cloud.pubsub:__getattr__", "google.cloud.pubsub:__dir__"),
          "Beam's DirectRunner imports its Pub/Sub connector at every pipeline's run (to look for Pub/Sub "
          "transforms), and the connector imports google.cloud.pubsub, whose __init__ imports the publisher "
          "and subscriber clients: about 0.14 s of the first Beam pipeline of every process, for a connector "
          "no tfxd pipeline uses. tfxd/deferred_imports.py runs the __init__ when one of the package's names "
          "is first read."),
    Patch("scipy.stats_deferred", "scipy", "1.12.0", ("scipy.stats:__getattr__", "scipy.stats:__dir__"),
          "tensorflow_model_analysis/utils/math_util.py imports scipy.stats (for the confidence intervals' "
          "Student's t), and TFMA's utils package imports it: 0.14 s of every process that imports TFMA, "
          "which TFX's component specs do, for intervals no tfxd spec asks for. tfxd/deferred_imports.py runs "
          "the package's __init__ when one of its names is first read."),
    Patch("google.package_names_known", "google-api-core", "2.29.0",
          ("google.api_core._python_version_support:_get_pypi_package_name",),
          "google.api_core, and every Google client package after it, labels its Python-version check with "
          "the package's distribution name, looked up for its dotted import name in importlib.metadata's "
          "packages_distributions(), which reads every installed distribution (0.06 s each time; 12 times as "
          "aiplatform imports) to answer None: its keys are top-level names. Beam imports api_core in every "
          "process that imports Beam. tfxd/deferred_work.py answers None for a dotted name at once."),
    Patch("tfdv.time_formats_deferred", "tensorflow-data-validation", "1.16.1",
          ("tensorflow_data_validation.statistics.generators.time_stats_generator:__getattr__",
           "tensorflow_data_validation.statistics.generators.time_stats_generator:__dir__"),
          "TFDV's stats_impl imports its time-format generator, which compiles a regular expression for each "
          "date and time format at its import (0.02-0.03 s of every process that imports TFDV), for "
          "semantic-domain statistics no tfxd spec asks for. tfxd/deferred_work.py runs the module's body "
          "when one of its names is first read."),
    Patch("beam.cloud_io_deferred", *_BEAM, ("apache_beam.io:__getattr__",),
          "apache_beam.io's __init__ imports the BigQuery and Pub/Sub connectors (google.cloud.bigquery, "
          "IPython's widgets): 0.7 s of Beam's 1.1 s import in every process that imports Beam, for "
          "connectors tfxd never uses; tfxd/deferred_imports.py skips them as Beam does without Google's "
          "libraries and this module __getattr__ imports them when one is first read."),
    Patch("beam.gcs_filesystem_deferred", *_BEAM, ("apache_beam.io.filesystems:FileSystems.get_filesystem",),
          "apache_beam/io/filesystems.py imports its GCS filesystem, and through it Google's storage, auth and "
          "API clients: 0.1-0.2 s of every process that imports Beam, which a run on local folders never uses. "
          "tfxd/deferred_imports.py skips it as Beam does without Google's libraries and imports it at the "
          "first gs:// path."),
    Patch("beam.direct_workers_forked", *_BEAM,
          ("apache_beam.transforms.environments:SubprocessSDKEnvironment.from_command_string",),
          "The DirectRunner's multi_processing mode starts every worker of every pipeline as a new Python "
          "(fn_runner.FnApiRunner.run_pipeline), which imports Beam, TensorFlow and the component's TFX library "
          "before its first bundle: about 4 s a component on 2 cores. Where a run started tfxd's SDK worker "
          "pool, the runner asks it for forked workers through Beam's own external environment."),
    Patch("beam.worker_loss_fails_bundles", *_BEAM,
          ("apache_beam.runners.portability.fn_api_runner.worker_handlers:BeamFnControlServicer.Control",
           "apache_beam.runners.portability.fn_api_runner.worker_handlers:ControlConnection.push",
           "apache_beam.runners.portability.fn_api_runner.fn_runner:BundleManager.process_bundle"),
          "In multi_processing mode a worker process that dies (out of memory, a crash, os._exit) breaks its "
          "control stream; the thread reading it ends and the futures the runner waits on are never answered "
          "(worker_handlers.ControlConnection._read): the run hangs for ever, with nothing said; or the bundle "
          "fails on its broken data stream with 'Channel closed prematurely.', naming no worker."),
    Patch("beam.signatures_remembered", *_BEAM, ("apache_beam.transforms.core:get_function_args_defaults",),
          "Every stage Beam runs builds its DoFns afresh and asks inspect.signature of each of their methods "
          "(apache_beam/transforms/userstate.py, get_dofn_specs), on every stage of every component: a "
          "signature read again thousands of times, of functions whose parameters were fixed when defined."),
    Patch("beam.dofn_specs_remembered", *_BEAM, ("apache_beam.transforms.userstate:get_dofn_specs",),
          "Beam reads a DoFn's state and timer specs (every method of it wrapped, its parameters read) as the "
          "ParDo is made, as it is turned into its proto and three times more for every stage that runs it "
          "(apache_beam/runners/common.py, DoFnSignature): a taxi run asked 3,544 times about 775 DoFns, 0.75 s."),
    Patch("beam.compressions_remembered", *_BEAM, ("apache_beam.internal.cloudpickle_pickler:bz2",),
          "Beam's pickler compresses every payload it pickles with bz2 at level 9 and decompresses every one it "
          "loads (apache_beam/internal/cloudpickle_pickler.py, dumps and loads): the same coders, functions "
          "and DoFns are pickled again for every pipeline's protos and loaded again for every stage, so most "
          "of that bz2 work is done on bytes it has already done (a taxi run: 0.5 s, more than half again)."),
    Patch("beam.option_views_remembered", *_BEAM, ("apache_beam.options.pipeline_options:PipelineOptions.view_as",),
          "Beam views a pipeline's options several times for every transform it applies (apache_beam/"
          "pipeline.py, _apply_internal), each view building an argparse parser and parsing the arguments "
          "again, though a view holds no values of its own (it reads the options' shared dictionary)."),
    Patch("beam.state_cache_off", *_BEAM,
          ("apache_beam.runners.portability.fn_api_runner.worker_handlers:STATE_CACHE_SIZE_MB",),
          "Beam's in-process runner weighs every value it caches (side inputs, iterables) by walking its object "
          "graph (objsize), every value every time, to bound a cache that in one process holds what is in "
          "memory already. Read when the runner starts its embedded worker."),
    Patch("beam.sampler_wakes_often", *_BEAM, ("apache_beam.runners.worker.statesampler:StateSampler.__init__",),
          "Every bundle ends by joining the thread that samples its state (statesampler_fast.pyx, stop), "
          "which sleeps up to 200 ms at a time, ever longer as the bundle runs: a bundle waits on average "
          "a tenth of its time for the thread to wake, with nothing else to do: in the in-process runner "
          "and in the SDK workers tfxd's pool forks (the DirectRunner's worker processes, a local Flink's "
          "or Spark's)."),
    Patch("tfx.pushes_copied_in_the_bucket", *_TFX, ("tfx.utils.io_utils:copy_dir", "tfx.utils.io_utils:copy_file"),
          "TFX's Pusher copies the model twice (to the serving path, and into its PushedModel artifact) through "
          "TensorFlow's filesystem, which on Cloud Storage reads each file down and uploads it again, asking "
          "four times first whether the copy exists (seven requests a file), and makes each folder level by "
          "level (eight a folder): 200 requests for taxi's model. components/pusher/executor.py has Cloud "
          "Storage copy each object itself (tfxd.bucket_objects.copy_folder) where both ends are on a bucket."),
    Patch("tfx.components_deferred", *_TFX,
          ("tfx.components:__getattr__", "tfx.components:__all__", "tfx.components:__dir__",
           "tfx.components:__doc__"),
          "tfx/components/__init__.py imports every standard component to bind its class, the Tuner's "
          "keras_tuner and Keras 3, the InfraValidator's Kubernetes client and the BulkInferrer's "
          "RunInference among them, whenever any module under tfx.components is imported; tfxd runs none of "
          "them. tfxd/deferred_imports.py runs the file when one of its names is first read."),
    Patch("tfx.orchestrator_pinned", *_TFX, ("tfx.orchestration.beam.beam_dag_runner:beam",),
          "TFX's BeamDagRunner makes its Beam pipeline without options (run_with_ir: beam.Pipeline()), so "
          "Beam 2.74's DirectRunner hands it to Prism: a download from GitHub, offline a failure and temporary "
          "folders left behind, online the orchestration on another engine."),
    Patch("tfx.command_line", *_TFX, ("sys:argv",),
          "TFX's Beam executors parse sys.argv with absl's flags (base_beam_executor.BaseBeamExecutor's "
          "__init__): tfxd's `-v` is absl's --verbosity, which took `run` as its value and failed ExampleGen."),
    Patch("tensorflow.graph_libraries_left_alone", "tensorflow", "2.16.2",
          ("tensorflow.python.autograph.core.config:CONVERSION_RULES",),
          "AutoGraph has a do-not-convert rule for `keras` but none for tf_keras (Keras 2 under "
          "TF_USE_LEGACY_KERAS) or tf.Transform: it transpiled Keras' train step, losses, metrics and layers "
          "when the first epoch traced them, and the TransformFeaturesLayer at each export: code written for "
          "graphs already, converted again for nothing."),
    Patch("tensorflow.closures_undecorated", "tensorflow", "2.16.2",
          ("tensorflow.python.util.tf_contextlib:contextmanager",),
          "TensorFlow makes two context managers anew at every call of the function around them, each wrapped "
          "in its API decorator (tf_decorator.make_decorator, which reads the closure's signature with inspect "
          "twice): FuncGraph.as_default's inner_cm, entered for every op a generated op wrapper adds to a "
          "function's graph (op_def_library._apply_op_helper), and ops.device's combined under a trace. "
          "About 45 us a call; a taxi Trainer made 2,100 of them."),
    Patch("tensorflow.create_op_unchecked", "tensorflow", "2.16.2",
          ("tensorflow.python.framework.ops:Graph.create_op",),
          "Graph.create_op's deprecation wrapper (for its compute_shapes argument, which the method ignores) "
          "binds the arguments of every call in graph mode with inspect (tf_inspect.getcallargs) to decide "
          "whether to warn: lift_to_graph copies each op of a pruned function through it, about 70 us an op, "
          "800 ops a taxi Trainer (the transform graph's signature at its load, its serving prune)."),
    Patch("keras.steps_traced_once", "tf_keras", "2.16.0",
          ("tf_keras.src.engine.training:Model.train_step", "tf_keras.src.engine.training:Model.test_step"),
          "With several steps per call, tf_keras's train and test functions loop `for _ in tf.range(steps): "
          "outputs = step_function(...)` (engine/training.py, make_train_function, make_test_function) with "
          "`outputs` undefined before the loop, so AutoGraph stages the body twice (a scratch graph to learn "
          "its type, then the loop's): every trace of Keras's step functions traced the model's whole train "
          "or test step twice (trainer_module/traced_once.py)."),
    Patch("aiplatform.settings_reset", "google-cloud-aiplatform", "1.165.1",
          ("google.cloud.aiplatform.initializer:global_config._api_endpoint",
           "google.cloud.aiplatform.initializer:global_config._api_transport",
           "google.cloud.aiplatform.initializer:global_config._credentials"),
          "aiplatform keeps the endpoint, transport and credentials in process-wide state that init() only "
          "adds to: an earlier call's endpoint or credentials would serve the next call."),
)
_BY_ID = {patch.id: patch for patch in PATCHES}


def applied(patch_id: str, value: Any, name: str | None = None) -> contextlib.AbstractContextManager[Any]:
    """Patch ``patch_id``'s target (``name``: of several) is ``value`` in the block (Patch.applied)."""
    return _BY_ID[patch_id].applied(value, name)


@contextlib.contextmanager
def applied_to_each(patch_id: str, value: Any) -> Iterator[None]:
    """Every target of patch ``patch_id`` is ``value`` in the block."""
    patch = _BY_ID[patch_id]
    with contextlib.ExitStack() as stack:
        for target in patch.targets:
            stack.enter_context(patch.applied(value, target))
        yield


def assigned(patch_id: str, value: Any, name: str | None = None) -> None:
    """Patch ``patch_id``'s target (``name``: of several, None: every one) is ``value`` from now on."""
    _BY_ID[patch_id].assigned(value, name)


def assigned_each(patch_id: str, values: dict[str, Any]) -> None:
    """Each of patch ``patch_id``'s targets named in ``values`` is its value from now on."""
    for name, value in values.items():
        _BY_ID[patch_id].assigned(value, name)
