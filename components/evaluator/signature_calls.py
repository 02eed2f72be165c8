"""TFMA's calls of a model's signature by position, made by the input's name.

TFMA calls a signature of the model with the batch of serialized examples as its one positional argument
(tensorflow_model_analysis/utils/model_util.py, _batch_reducible_process: ``signature(tf.constant(inputs,
dtype=tf.string))``). A loaded SavedModel's signature takes keyword arguments only, so TensorFlow first
tries the structured call, which fails and builds its TypeError's message, the repr of every example in the
batch, and only then falls back to the flat signature, which takes the positional tensor
(tensorflow/python/eager/polymorphic_function/concrete_function.py, _call_impl): about a tenth of the taxi
Evaluator's worker time went to those messages. Here a signature with one input gets that argument by its
name; every other call, and every attribute TFMA reads, is the signature's own.
"""

from __future__ import annotations

from typing import Any


def one_input(signature: Any) -> str | None:
    """The name of ``signature``'s only input where it takes one keyword argument and nothing else."""
    structured = getattr(signature, "structured_input_signature", None)
    if not isinstance(structured, tuple) or len(structured) != 2:
        return None
    args, kwargs = structured
    if args or not isinstance(kwargs, dict) or len(kwargs) != 1:
        return None
    return next(iter(kwargs))


class ByName:
    """``signature`` (one input, ``name``) called with one positional argument: called with it by name."""

    def __init__(self, signature: Any, name: str) -> None:
        self._signature, self._name = signature, name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._signature, attribute)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs:
            return self._signature(**{self._name: args[0]})
        return self._signature(*args, **kwargs)


def get_callable(tfmas_own: Any) -> Any:
    """TFMA's model_util.get_callable (``tfmas_own``), handing out a one-input signature as ByName."""

    def get(model: Any, signature_name: str | None = None, required: bool = True) -> Any:
        found = tfmas_own(model, signature_name, required)
        name = one_input(found)
        return found if name is None else ByName(found, name)

    return get
