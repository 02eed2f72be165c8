from __future__ import annotations

import pytest

from tfxd.pipeline.spec.overrides import OverrideSyntaxError, parse_path


@pytest.mark.parametrize(("text", "path"), [("training.steps", ("training", "steps")),
                                            ("features[0].fill", ("features", 0, "fill")),
                                            ("features.2.fill", ("features", 2, "fill"))])
def test_paths(text, path):
    assert parse_path(text) == path


@pytest.mark.parametrize("text", ["", ".a", "a..b", "a[x]", "a]"])
def test_bad_paths(text):
    with pytest.raises(OverrideSyntaxError):
        parse_path(text)
