"""Spec -> tfx Pipeline: tfxd's ExampleGen, StatisticsGen, SchemaGen (or ImportSchemaGen),
ExampleValidator, Transform and Trainer, then a resolver for the blessed baseline, TFX's Evaluator
(TFMA, on raw examples through the model's transform_features signature) and Pusher."""

from __future__ import annotations

import os
from typing import Any

from pipeline.example_gen_config import example_gen_config
from pipeline.load import LoadedSpec
from pipeline.spec import COMPONENTS

RESOLVER = "latest_blessed_model_resolver"
# The sections of the spec the Trainer reads: the rest (evaluation, push, targets...) can change
# without retraining.
TRAINER_SECTIONS = ("tfxd", "name", "features", "preprocessing_fn", "label", "model", "training")


def transform_config(loaded: LoadedSpec) -> dict[str, Any]:
    """What the generic preprocessing_fn reads: the features and the label, every default filled in."""
    spec = loaded.spec
    return {"features": [feature.model_dump(mode="json") for feature in spec.features],
            "label": spec.label.model_dump(mode="json")}


def _reads(expr: str | None, column: str | None) -> set[str]:
    """The data columns a feature or the label reads: its expression's columns, or its own column."""
    from pipeline import expressions

    return set(expressions.columns(expr)) if expr else {column} if column else set()


def _feature_columns(loaded: LoadedSpec) -> set[str]:
    return set().union(*(_reads(f.expr, f.name) for f in loaded.spec.features))


def _label_columns(loaded: LoadedSpec) -> set[str]:
    return _reads(loaded.spec.label.expr, loaded.spec.label.column)


def trainer_config(loaded: LoadedSpec, cluster: dict[str, int] | None) -> dict[str, Any]:
    """What run_fn reads: the resolved spec, the local cluster, and the columns only the label reads."""
    from components.trainer.executor import LOCAL_CLUSTER_KEY
    from trainer_module.run_fn import LABEL_ONLY_KEY, SPEC_KEY

    spec = loaded.spec
    label_only = sorted(_label_columns(loaded) - _feature_columns(loaded)) if spec.features else []
    return {SPEC_KEY: spec.model_dump(mode="json", by_alias=True, include=set(TRAINER_SECTIONS)),
            LOCAL_CLUSTER_KEY: cluster,
            LABEL_ONLY_KEY: label_only}


def columns_read(loaded: LoadedSpec) -> list[str]:
    """The data columns the spec's features and label read ([] with a user preprocessing_fn: unknown)."""
    if loaded.spec.preprocessing_fn:
        return []
    return sorted(_feature_columns(loaded) | _label_columns(loaded))


def components(loaded: LoadedSpec, to: str | None = None, target: str = "local") -> list[Any]:
    """The pipeline's nodes in order, up to the component ``to`` (default: all of them), for ``target``
    (local, kubeflow or vertex: see pipeline.placement)."""
    from tfx.components import Evaluator, Pusher, SchemaGen, StatisticsGen
    from tfx.components.schema_gen.import_schema_gen.component import ImportSchemaGen
    from tfx.proto import example_gen_pb2, pusher_pb2

    from components.example_gen.component import BigQueryExampleGen, ExampleGen
    from components.example_validator.component import ExampleValidator
    from components.trainer.component import RUN_FN, Trainer
    from components.transform.component import PREPROCESSING_FN, Transform
    from pipeline.evaluation import eval_config
    from pipeline.placement import Placement

    spec = loaded.spec
    place = Placement(loaded, target)
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
    if spec.data.format == "bigquery":
        example_gen = BigQueryExampleGen(input_config, output_config, config.reader)
    else:
        example_gen = ExampleGen(place.where(config.input_base or ""), input_config, output_config, config.reader)
    examples = example_gen.outputs["examples"]
    statistics = StatisticsGen(examples=examples)
    if spec.validation.schema_ == "infer":
        schema_gen = SchemaGen(statistics=statistics.outputs["statistics"], infer_feature_shape=True)
    else:
        schema_gen = ImportSchemaGen(schema_file=place.path(spec.validation.schema_))
    schema = schema_gen.outputs["schema"]
    validator = ExampleValidator(statistics.outputs["statistics"], schema, spec.validation.fail_on_anomalies,
                                 columns_read(loaded))
    user_fn = spec.preprocessing_fn.replace(":", ".") if spec.preprocessing_fn else None
    transform = Transform(examples=examples, schema=schema, preprocessing_fn=user_fn or PREPROCESSING_FN,
                          custom_config=transform_config(loaded))
    if spec.validation.fail_on_anomalies:
        transform.add_upstream_node(validator)  # the gate: nothing is transformed from data that failed it
    train_args, eval_args = _steps(spec, place)
    local_cluster = spec.targets.local.trainer.model_dump() if target == "local" else None
    trainer_class, trainer_custom = Trainer, trainer_config(loaded, local_cluster)
    vertex = spec.targets.vertex
    if target == "vertex" and vertex is not None:
        from kubeflow import vertex_trainer

        if vertex_trainer.needs_custom_job(vertex.trainer):
            trainer_class = vertex_trainer.VertexTrainer
            trainer_custom = {**trainer_custom, **vertex_trainer.custom_config(vertex)}
    trainer = trainer_class(examples=transform.outputs["transformed_examples"],
                            transform_graph=transform.outputs["transform_graph"], schema=schema,
                            run_fn=RUN_FN, train_args=train_args, eval_args=eval_args, custom_config=trainer_custom)
    model = trainer.outputs["model"]
    resolver = _baseline_resolver(model, place)
    evaluator = Evaluator(examples=examples, model=model, baseline_model=resolver.outputs["model"],
                          eval_config=eval_config(spec))
    pusher = Pusher(model=model, model_blessing=evaluator.outputs["blessing"],
                    push_destination=pusher_pb2.PushDestination(filesystem=pusher_pb2.PushDestination.Filesystem(
                        base_directory=place.push_to())))
    named = [example_gen, statistics, schema_gen, validator, transform, trainer, evaluator, pusher]
    for name, component in zip(COMPONENTS, named, strict=True):
        component.with_id(name)
    nodes = [*named[:6], resolver, *named[6:]]
    return nodes if to is None else nodes[: [n.id for n in nodes].index(to) + 1]


# Runtime parameters of a compiled pipeline: a run or a schedule can change the training length
# without recompiling (TFX takes them as the JSON of TrainArgs / EvalArgs).
TRAIN_ARGS_PARAMETER = "train_args"
EVAL_ARGS_PARAMETER = "eval_args"


def runtime_parameters(spec) -> dict[str, str]:
    """The compiled pipeline's parameters and their values from the spec."""
    from google.protobuf import json_format
    from tfx.proto import trainer_pb2

    train = trainer_pb2.TrainArgs(num_steps=spec.training.steps or 0)
    evaluate = trainer_pb2.EvalArgs(num_steps=spec.training.eval_steps)
    return {name: json_format.MessageToJson(args, sort_keys=True, indent=None)
            for name, args in ((TRAIN_ARGS_PARAMETER, train), (EVAL_ARGS_PARAMETER, evaluate))}


def _steps(spec, place) -> tuple[Any, Any]:
    from tfx.orchestration import data_types
    from tfx.proto import trainer_pb2

    if not place.on_cluster:
        return (trainer_pb2.TrainArgs(num_steps=spec.training.steps or 0),
                trainer_pb2.EvalArgs(num_steps=spec.training.eval_steps))
    return tuple(data_types.RuntimeParameter(name=name, ptype=str, default=value)
                 for name, value in runtime_parameters(spec).items())


def _baseline_resolver(model, place):
    """Locally, the latest blessed model other than the candidate (pipeline.baseline); compiled, TFX's
    LatestBlessedModelStrategy, the one strategy Kubeflow's and Vertex's compiler translate."""
    from tfx.dsl.components.common.resolver import Resolver
    from tfx.dsl.input_resolution.strategies.latest_blessed_model_strategy import (
        LatestBlessedModelStrategy,
    )
    from tfx.types import Channel, standard_artifacts

    from pipeline import baseline

    channels = {baseline.MODEL_KEY: Channel(type=standard_artifacts.Model),
                baseline.BLESSING_KEY: Channel(type=standard_artifacts.ModelBlessing)}
    if place.on_cluster:
        return Resolver(strategy_class=LatestBlessedModelStrategy, **channels).with_id(RESOLVER)
    return Resolver(strategy_class=baseline.LatestBlessedOtherModelStrategy,
                    **{**channels, baseline.CANDIDATE_KEY: model}).with_id(RESOLVER)


def metadata_path(root: str) -> str:
    return os.path.join(root, "metadata.sqlite")


def tfx_pipeline(loaded: LoadedSpec, root: str, to: str | None = None, target: str = "local"):
    """The tfx Pipeline: for a local run under ``root`` (caching on, SQLite ML Metadata), or to compile
    for ``target`` kubeflow or vertex (the target's root and image; its own metadata)."""
    from tfx.orchestration import metadata, pipeline

    from pipeline.beam_args import beam_args, lighten_in_memory_runner
    from pipeline.data_columns import input_bytes
    from pipeline.placement import Placement

    spec = loaded.spec
    place = Placement(loaded, target)
    image = getattr(spec.targets, target).image if place.on_cluster else None
    args = beam_args(spec, image, None if place.on_cluster else input_bytes(loaded))
    if not place.on_cluster:
        lighten_in_memory_runner(args)
    return pipeline.Pipeline(
        pipeline_name=spec.name,
        pipeline_root=place.pipeline_root(),
        components=components(loaded, to, target),
        enable_cache=True,
        metadata_connection_config=None if place.on_cluster else metadata.sqlite_metadata_connection_config(
            metadata_path(root)),
        beam_pipeline_args=args,
    )
