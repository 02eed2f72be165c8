"""An attribute of a library's module or class replaced for a block, and put back however the block ends.

tfxd mends a few things in TFX, tf.Transform and Beam while one of its own calls runs (a Transform's
analysis, a run's pipelines): each mend says why where it is made; this is how each is made and undone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

_ABSENT = object()


@contextlib.contextmanager
def replaced(owner: Any, name: str, value: Any) -> Iterator[Any]:
    """``owner.name`` is ``value`` in the block, which gets what it was (as ``getattr`` reads it). The owner's
    own entry is put back as it was, a class's descriptor (a classmethod, a staticmethod) included; an
    attribute the owner only inherited is removed from it again."""
    original = vars(owner).get(name, _ABSENT)
    before = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield before
    finally:
        if original is _ABSENT:
            delattr(owner, name)
        else:
            setattr(owner, name, original)
