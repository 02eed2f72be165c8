"""The Trainer's custom_config crosses from the assembly into a compiled file, then into the launcher and
each replica on other machines: one type, one writer, one reader, and the keys the dicts it replaced
wrote (keys.TrainerConfig), each only where it says something."""

from __future__ import annotations

import json

import pytest

from tests.components.trainer.test_tfjob import settings
from tfxd import keys, trainer_config
from tfxd.trainer_config import ProcessCluster, TrainerCustomConfig

CONFIG = keys.TrainerConfig
VERTEX_KEYS = {"ai_platform_training_args": {"project": "p", "job_spec": {}}, "ai_platform_enable_vertex": True,
               "ai_platform_vertex_region": "us-central1"}


def test_what_is_written_is_read_back(tmp_path):
    tfjob = TrainerCustomConfig({"training": {}}, None, ("tips",), operator_job=settings(tmp_path))
    facts = tfjob.with_run_facts(80, ["2026-11-25"], "/runs/.backup/ab")
    for config in (TrainerCustomConfig({"a": 1}, ProcessCluster(2, 1)), tfjob, facts,
                   TrainerCustomConfig({}, launcher=VERTEX_KEYS)):
        assert TrainerCustomConfig.from_json(json.loads(config.to_text())) == config
        assert trainer_config.of({"custom_config": config.to_text()}) == config


def test_the_keys_are_the_ones_the_replicas_and_tfx_read(tmp_path):
    config = TrainerCustomConfig({"training": {}}, ProcessCluster(), launcher=VERTEX_KEYS)
    assert config.to_json() == {CONFIG.SPEC: {"training": {}}, CONFIG.LABEL_ONLY: [],
                                CONFIG.LOCAL_CLUSTER: {"workers": 1, "parameter_servers": 0, "network": "loopback"}, **VERTEX_KEYS}
    facts = config.with_run_facts(None, None, "/b").to_json()  # no split counts, no spans: not written
    assert (facts[CONFIG.BACKUP_DIR], CONFIG.TRAIN_EXAMPLES in facts, CONFIG.SPANS in facts) == ("/b", False, False)
    tfjob = TrainerCustomConfig({}, operator_job=settings(tmp_path))
    assert tfjob.to_json()[CONFIG.OPERATOR_JOB]["timeout_seconds"] == 2 * 3600  # the spec says "2h"
    assert CONFIG.OPERATOR_JOB not in tfjob.for_replicas().to_json()  # replicas launch nothing


def test_a_process_cluster_says_whether_it_is_distributed():
    assert [ProcessCluster(*shape).distributed for shape in ((1, 0), (2, 0), (1, 1))] == [False, True, True]


def test_a_config_without_the_spec_is_refused_by_name():
    with pytest.raises(KeyError, match=CONFIG.SPEC):
        TrainerCustomConfig.from_json({CONFIG.LABEL_ONLY: []})
