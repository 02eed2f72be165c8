"""The spec and what is made of it: spec/ (models, YAML with positions, errors, overrides, placement),
assembly/ (spec -> the TFX pipeline), run/ (local runs and what they did) and report/ (summary, report.html,
graph)."""
