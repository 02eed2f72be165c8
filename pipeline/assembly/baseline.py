"""The Evaluator's baseline: the latest blessed model other than the one being evaluated.

TFX's LatestBlessedModelStrategy hands a model its own earlier blessing as the baseline: a rerun of an
unchanged pipeline then feeds the Evaluator a new input and evaluates the same model against itself
instead of reusing the cached result. Leaving the candidate out keeps a rerun fully cached and compares
a new model with the last blessed one.
"""

from __future__ import annotations

from tfx.dsl.input_resolution.strategies.latest_blessed_model_strategy import (
    LatestBlessedModelStrategy,
)

MODEL_KEY = "model"
BLESSING_KEY = "model_blessing"
CANDIDATE_KEY = "candidate"  # the model the Evaluator is about to evaluate (this run's Trainer output)


class LatestBlessedOtherModelStrategy(LatestBlessedModelStrategy):
    """Inputs: every Model, every ModelBlessing and the candidate; output: the newest blessed Model that
    is not the candidate, with its blessing (or nothing)."""

    def resolve_artifacts(self, store, input_dict):
        candidates = {artifact.id for artifact in input_dict.get(CANDIDATE_KEY, [])}
        models = [model for model in input_dict.get(MODEL_KEY, []) if model.id not in candidates]
        blessings = list(input_dict.get(BLESSING_KEY, []))
        result = {MODEL_KEY: [], BLESSING_KEY: []}
        if models and blessings:
            result = self._resolve({MODEL_KEY: models, BLESSING_KEY: blessings}, MODEL_KEY, BLESSING_KEY)
        return {**result, CANDIDATE_KEY: list(input_dict.get(CANDIDATE_KEY, []))}
