"""Spec -> the TFX pipeline: tfxd's components and TFX's, their configs, Beam's arguments, the
Evaluator's config and its baseline, for a local run or a target to compile for."""
