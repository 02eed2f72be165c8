"""Spec -> the TFX pipeline: tfxd's ExampleGen, StatisticsGen, SchemaGen (or ImportSchemaGen),
ExampleValidator, Transform and Trainer, then a resolver for the blessed baseline, the Evaluator
(TFMA, on raw examples through the model's transform_features signature) and Pusher (TFX's two, with
tfxd's executors: components/evaluator, components/pusher); for a local run
or for a target to compile for (pipeline.spec.placement says where its files are)."""

from __future__ import annotations

import contextlib
import posixpath
from dataclasses import replace
from typing import Any

from google.protobuf import json_format
from tfx.components.schema_gen.component import SchemaGen
from tfx.components.schema_gen.import_schema_gen.component import ImportSchemaGen
from tfx.dsl.components.common.resolver import Resolver
from tfx.dsl.experimental.conditionals.conditional import Cond
from tfx.dsl.input_resolution.strategies.latest_blessed_model_strategy import (
    LatestBlessedModelStrategy,
)
from tfx.orchestration import data_types, pipeline
from tfx.proto import example_gen_pb2, pusher_pb2, trainer_pb2
from tfx.types import Channel, standard_artifacts
from tfx.types.channel import ChannelWrappedPlaceholder

from tfxd import keys
from tfxd.components.baseline.component import LatestPushedModel
from tfxd.components.evaluator.component import Evaluator
from tfxd.components.example_gen.column_sources import column_wise
from tfxd.components.example_gen.component import BigQueryExampleGen, ExampleGen
from tfxd.components.example_validator.component import ExampleValidator
from tfxd.components.pusher.component import Pusher
from tfxd.components.statistics_gen.component import StatisticsGen
from tfxd.components.trainer.component import Trainer
from tfxd.components.trainer.job_launch import OperatorTrainer
from tfxd.components.transform.component import Transform
from tfxd.formats import FORMATS
from tfxd.keys import NEW_DATA_PROPERTY
from tfxd.pipeline.assembly import baseline
from tfxd.pipeline.assembly.beam_args import example_gen_args, pipeline_beam_args
from tfxd.pipeline.assembly.configs import (
    columns_read,
    example_gen_config,
    operator_settings,
    trainer_config,
    transform_config,
)
from tfxd.pipeline.assembly.evaluation import eval_config
from tfxd.pipeline.spec.base import COMPONENTS
from tfxd.pipeline.spec.document import Spec
from tfxd.pipeline.spec.loaded import LoadedSpec
from tfxd.pipeline.spec.placement import Placement
from tfxd.trainer_config import ProcessCluster, TrainerCustomConfig

# Runtime parameters of a compiled pipeline: a run or a schedule can change the training length
# without recompiling (TFX takes them as the JSON of TrainArgs / EvalArgs).
TRAIN_ARGS_PARAMETER = "train_args"
EVAL_ARGS_PARAMETER = "eval_args"
SPAN_PARAMETER = "span"  # with spans in data.path: the span to read ("" for the spec's data.spans)
DRIFT_STORE = "tfxd_span_statistics"  # under the pipeline root: the drift gate's statistics per span


def nodes(loaded: LoadedSpec, to: str | None = None, target: str = "local") -> list[Any]:
    """The pipeline's nodes in order, up to the component ``to`` (default: all of them), for ``target``
    (local, kubeflow or vertex)."""
    place = Placement(loaded, target)
    example_gen = _example_gen(loaded, place)
    with _when_new_data(loaded, example_gen):
        rest = _after_example_gen(loaded, place, example_gen.outputs["examples"])
    named = [example_gen, *rest[:-2]]
    for name, component in zip(COMPONENTS, named, strict=True):
        component.with_id(name)
    warm_start, resolver = rest[-2:]
    ordered = [*named[:5], *([warm_start] if warm_start else []), named[5], resolver, *named[6:]]
    if to is None:
        return ordered
    kept = ordered[: [n.id for n in ordered].index(to) + 1]
    transform, validator = named[4], named[3]
    if transform not in kept and transform in validator.downstream_nodes:
        transform.remove_upstream_node(validator)  # `--to ExampleValidator`: the gate with nothing behind it
    return kept


def _when_new_data(loaded: LoadedSpec, example_gen) -> Any:
    """With spans in data.path and `on_no_new_data: skip`, every component after ExampleGen runs only when
    ExampleGen found new data (keys.NEW_DATA_PROPERTY): TFX's condition, which the local runners evaluate
    before a component's inputs are resolved and which TFX's Kubeflow V2 compiler writes into each task as
    its `triggerPolicy.condition`, so a run with nothing new ends successfully on every runner."""
    data = loaded.spec.data
    if data.span_pattern is None or data.on_no_new_data != "skip":
        return contextlib.nullcontext()
    # Not `.future()`: it comes with the channel's implicit key ("_ExampleGen.examples") already set, which
    # TFX 1.16's Kubeflow V2 compiler then writes into the first task it compiles even when that task takes
    # the examples under its own key ("examples"), and the driver fails on a key the task has no input for.
    # Without a key, the compiler asks each task for its own.
    examples = ChannelWrappedPlaceholder(example_gen.outputs["examples"])[0]
    return Cond(examples.custom_property(NEW_DATA_PROPERTY) == 1)


def _after_example_gen(loaded: LoadedSpec, place: Placement, examples) -> list[Any]:
    """StatisticsGen to Pusher (in COMPONENTS' order), then the warm-start resolver (or None) and the
    baseline resolver."""
    spec = loaded.spec
    statistics = StatisticsGen(examples=examples)
    if spec.validation.schema_ == "infer":
        schema_gen = SchemaGen(statistics=statistics.outputs["statistics"], infer_feature_shape=True)
    else:
        schema_gen = ImportSchemaGen(schema_file=place.path(spec.validation.schema_))
    schema = schema_gen.outputs["schema"]
    drift = spec.validation.drift
    validator = ExampleValidator(
        statistics.outputs["statistics"], schema, spec.validation.fail_on_anomalies, columns_read(loaded),
        drift={**drift.model_dump(), "store": posixpath.join(place.pipeline_root(), DRIFT_STORE)} if drift else None,
        examples=examples if drift or _classes(spec) else None,  # spans for drift; classes to count
        skew=spec.validation.skew.model_dump() if spec.validation.skew else None,
        label=_classes(spec))
    user_fn = spec.preprocessing_fn.replace(":", ".") if spec.preprocessing_fn else None
    # Nothing reads Transform's own statistics, schemas and anomalies (StatisticsGen and ExampleValidator
    # judged the data already) or its analyzer cache (no run hands it back): both only cost Beam stages
    # tfxd's own preprocessing_fn runs in tf.Transform's TF1 graph mode: the same transformed examples and
    # model (tests/components/transform/test_combined_analyzers.py) from one graph, where TF2 mode traces
    # the function into several tf.functions (bench/RESULTS.md); a user's preprocessing_fn keeps TF2 mode
    transform = Transform(examples=examples, schema=schema, preprocessing_fn=user_fn or keys.PREPROCESSING_FN,
                          custom_config=transform_config(loaded), disable_statistics=True,
                          disable_analyzer_cache=True, force_tf_compat_v1=user_fn is None)
    gates = (drift, spec.validation.skew)
    if (spec.validation.fail_on_anomalies or any(gate and gate.action == "fail" for gate in gates)
            or _classes(spec)):
        transform.add_upstream_node(validator)  # the gate: nothing is transformed from data that failed it
    warm_start = _warm_start_resolver(place) if spec.training.warm_start else None
    trainer = _trainer(loaded, place, transform, schema, warm_start)
    model = trainer.outputs["model"]
    resolver = _baseline_resolver(model, place)
    evaluator = Evaluator(examples=examples, model=model, baseline_model=resolver.outputs["model"],
                          eval_config=eval_config(spec))
    pusher = Pusher(model=model, model_blessing=evaluator.outputs["blessing"],
                    push_destination=pusher_pb2.PushDestination(filesystem=pusher_pb2.PushDestination.Filesystem(
                        base_directory=place.push_to())))
    return [statistics, schema_gen, validator, transform, trainer, evaluator, pusher, warm_start, resolver]


def _classes(spec: Spec) -> dict | None:
    """What ExampleValidator checks of a multiclass label read from a column (its classes by split)."""
    label = spec.label
    if label.task != "multiclass" or label.column is None:
        return None
    return {"column": label.column, "num_classes": label.num_classes}


def _example_gen(loaded: LoadedSpec, place: Placement):
    spec = loaded.spec
    project = spec.targets.vertex.project if spec.targets.vertex else None
    config = example_gen_config(loaded, project)
    input_config = example_gen_pb2.Input(splits=[
        example_gen_pb2.Input.Split(name=name, pattern=pattern) for name, pattern in config.input_splits])
    split_config = example_gen_pb2.SplitConfig(splits=[
        example_gen_pb2.SplitConfig.Split(name=name, hash_buckets=buckets) for name, buckets in config.output_buckets])
    if config.split_key:
        split_config.partition_feature_name = config.split_key
    # pattern splits: no output split config, each input split is an output split
    output_config = example_gen_pb2.Output(split_config=split_config) if config.output_buckets else (
        example_gen_pb2.Output())
    if not FORMATS[spec.data.format].files:
        return BigQueryExampleGen(input_config, output_config, config.reader)
    reader, span = config.reader, ""
    if reader.spans is not None:
        # the pattern and the push destination as the executor sees them; on a cluster the span is a runtime
        # parameter and the schedule and creation times placeholders (kubeflow/compile.py); a local run
        # reads `span: scheduled` by the day it started
        drift = posixpath.join(place.pipeline_root(), DRIFT_STORE) if spec.validation.drift else None
        reader = reader.with_spans(replace(reader.spans, path=place.path(spec.data.path or ""),
                                           pushed_to=place.push_to(), drift_store=drift,
                                           local=not place.on_cluster))
        if place.on_cluster:
            span = data_types.RuntimeParameter(name=SPAN_PARAMETER, ptype=str, default="")
    return ExampleGen(place.where(config.input_base or ""), input_config, output_config, reader, span)


def _trainer(loaded: LoadedSpec, place: Placement, transform, schema, warm_start):
    """tfxd's Trainer: in the pipeline's own process (and locally, as a cluster of processes when
    targets.local.trainer asks for one), as a Vertex AI custom job when targets.vertex.trainer asks
    for several replicas or accelerators, or as an operator's job (a TrainJob or a TFJob) when
    targets.kubeflow.trainer asks for several replicas."""
    spec = loaded.spec
    trainer_class: type[Any] = Trainer
    local = spec.targets.local.trainer
    custom_config = trainer_config(
        loaded, None if place.on_cluster else ProcessCluster(local.workers, local.parameter_servers, local.network))
    section = spec.targets.section(place.target)
    launcher = section.trainer_launcher() if section is not None else None
    if launcher is not None:
        trainer_class, custom_config = _LAUNCHERS[launcher](loaded, custom_config)
    train_args, eval_args = _steps(spec, place)
    return trainer_class(examples=transform.outputs["transformed_examples"],
                         transform_graph=transform.outputs["transform_graph"], schema=schema,
                         run_fn=keys.RUN_FN, train_args=train_args, eval_args=eval_args,
                         custom_config=custom_config.to_json(),
                         base_model=warm_start.outputs["model"] if warm_start else None)


def _operator_job(loaded: LoadedSpec, config: TrainerCustomConfig) -> tuple[type[Any], TrainerCustomConfig]:
    settings = operator_settings(loaded.spec.name, loaded.spec.targets.kubeflow)
    return OperatorTrainer, replace(config, operator_job=settings)


def _vertex_custom_job(loaded: LoadedSpec, config: TrainerCustomConfig) -> tuple[type[Any], TrainerCustomConfig]:
    # start-up: the Vertex training client (aiplatform) loads only when compiling for Vertex
    from tfxd.components.trainer import vertex_job

    return vertex_job.VertexTrainer, replace(config, launcher=vertex_job.custom_config(loaded.spec.targets.vertex))


# The Trainer classes that launch its replicas outside the pipeline task, by the launcher a target names
# (pipeline.spec.targets: TargetSection.trainer_launcher), with what each adds to the custom_config.
_LAUNCHERS = {keys.OPERATOR_JOB_LAUNCHER: _operator_job, keys.VERTEX_JOB_LAUNCHER: _vertex_custom_job}


def runtime_parameters(spec: Spec) -> dict[str, str]:
    """The compiled pipeline's parameters and their values from the spec."""
    train = trainer_pb2.TrainArgs(num_steps=spec.training.steps or 0)
    evaluate = trainer_pb2.EvalArgs(num_steps=spec.training.eval_steps)
    values = {name: json_format.MessageToJson(args, sort_keys=True, indent=None)
              for name, args in ((TRAIN_ARGS_PARAMETER, train), (EVAL_ARGS_PARAMETER, evaluate))}
    if spec.data.span_pattern is not None:
        values[SPAN_PARAMETER] = ""
    return values


def _steps(spec: Spec, place: Placement) -> tuple[Any, Any]:
    if not place.on_cluster:
        return (trainer_pb2.TrainArgs(num_steps=spec.training.steps or 0),
                trainer_pb2.EvalArgs(num_steps=spec.training.eval_steps))
    values = runtime_parameters(spec)
    return tuple(data_types.RuntimeParameter(name=name, ptype=str, default=values[name])
                 for name in (TRAIN_ARGS_PARAMETER, EVAL_ARGS_PARAMETER))


def _baseline_resolver(model, place: Placement):
    """The Evaluator's baseline: this pipeline's latest blessed model other than the candidate. Locally a
    resolver reading the root's ML Metadata, where the pipeline's own context scopes it (baseline.py); on
    a cluster a task reading the pipeline's push destination (components/baseline, tfxd.pushed), where
    Pusher puts exactly the blessed models: the question ExampleGen's no-new-data check and the warm start
    ask too, answered alike on Kubeflow (whose open-source backend runs no resolver) and Vertex (whose
    resolver queries would reach every pipeline of the same name in the project's metadata store, staging
    and production alike), and in `tfxd replay`."""
    if place.on_cluster:
        return LatestPushedModel(candidate=model, push_destination=place.push_to()).with_id(keys.RESOLVER)
    channels = {baseline.MODEL_KEY: Channel(type=standard_artifacts.Model),
                baseline.BLESSING_KEY: Channel(type=standard_artifacts.ModelBlessing)}
    return Resolver(strategy_class=baseline.LatestBlessedOtherModelStrategy,
                    **{**channels, baseline.CANDIDATE_KEY: model}).with_id(keys.RESOLVER)


def _warm_start_resolver(place: Placement):
    """training.warm_start: the pipeline's latest blessed model, before this run trains one; found as the
    baseline is (TFX's LatestBlessedModelStrategy locally, the push destination on a cluster)."""
    if place.on_cluster:
        return LatestPushedModel(candidate=None, push_destination=place.push_to()).with_id(keys.WARM_START_RESOLVER)
    return Resolver(strategy_class=LatestBlessedModelStrategy,
                    **{baseline.MODEL_KEY: Channel(type=standard_artifacts.Model),
                       baseline.BLESSING_KEY: Channel(type=standard_artifacts.ModelBlessing)}
                    ).with_id(keys.WARM_START_RESOLVER)


def tfx_pipeline(loaded: LoadedSpec, target: str = "local", to: str | None = None, metadata=None):
    """The tfx Pipeline: for a local run (caching on, ``metadata`` the runner's ML Metadata connection),
    or to compile for ``target`` kubeflow or vertex (the target's root and image; its own metadata)."""
    spec = loaded.spec
    place = Placement(loaded, target)
    image = getattr(spec.targets, target).image if place.on_cluster else None
    args = pipeline_beam_args(loaded, image)
    components = nodes(loaded, to, target)
    own = example_gen_args(spec, args, column_wise(spec.data.format, spec.data.split_key is not None))
    if own:
        components[0].with_beam_pipeline_args(own)
    return pipeline.Pipeline(
        pipeline_name=spec.name,
        pipeline_root=place.pipeline_root(),
        components=components,
        enable_cache=True,
        metadata_connection_config=metadata,
        beam_pipeline_args=args,
    )
