"""TensorFlow's parse of a block of tf.Examples (parsed_examples) is taken only where every byte of every
record is accounted for: what it was not told of is never dropped in silence. Judged against tfx_bsl's
decoder (the one TFX's readers use) on the same records."""

from __future__ import annotations

import pytest

from tests.components.example_gen.test_example_columns import _example, _tfx_bsl_examples
from tfxd.components.example_gen import parsed_examples


def _decoded(records: list[bytes]):
    from tfx_bsl.coders import example_coder

    return example_coder.ExamplesToRecordBatchDecoder().DecodeBatch(records)


def _parser(records: list[bytes]) -> parsed_examples.Parser:
    """A parser that learnt ``records``' features (its sample)."""
    import tensorflow as tf

    parser = parsed_examples.Parser(lambda block: _decoded(block.numpy().tolist()), sample=len(records))
    parser.records(tf.constant(records))
    return parser


def _parse(parser: parsed_examples.Parser, records: list[bytes]):
    import tensorflow as tf

    return parser.parse(tf.constant(records))[0]


def _same_as_tfx_bsl(batch, records: list[bytes]) -> None:
    expected = _decoded(records)
    assert sorted(batch.schema.names) == sorted(expected.schema.names)
    for name in expected.schema.names:
        assert batch.column(name).to_pylist() == expected.column(name).to_pylist(), name


ROWS = [{"n": 1, "x": 2.5, "word": "a", "many": [1, -(2**63), 2**40]},
        {"n": None, "x": -1.0, "word": "日本", "many": None},
        {"n": 300, "x": None, "word": None, "many": [7]}]


@pytest.mark.parametrize("encode", [lambda rows: [_example(row) for row in rows], _tfx_bsl_examples],
                         ids=["missing: no feature", "missing: a feature with no values"])
def test_known_features_parse_as_tfx_bsl_decodes_them(encode):
    records = encode(ROWS)
    batch = _parse(_parser(records[:1]), records)
    assert batch is not None
    _same_as_tfx_bsl(batch, records)


def test_a_feature_not_learnt_refuses_the_block():
    """The judge bites: TensorFlow would parse the block without `late`, and drop it in silence."""
    import tensorflow as tf

    parser = _parser([_example(row) for row in ROWS])
    assert _parse(parser, [_example(row) for row in ROWS]) is not None
    block = [_example(ROWS[0]), _example({**ROWS[1], "late": 5}), _example(ROWS[2])]
    batch, unaccounted = parser.parse(tf.constant(block))
    assert batch is None and unaccounted.tolist() == [1]  # the record holding it named
    assert _parse(parser, [_example({**ROWS[0], "late": "five"})]) is None  # one of another kind too


def test_the_records_not_accounted_for_teach_the_parser_their_features():
    """A feature the sample never gave a kind (no record of it had a value) is learnt from the records
    that hold it, decoded alone; the block is then parsed, as tfx_bsl decodes it."""
    import tensorflow as tf

    decoded = []
    parser = parsed_examples.Parser(lambda block: decoded.append(len(block)) or _decoded(block.numpy().tolist()),
                                    sample=2)
    rows = [{**row, "rare": None} for row in ROWS] * 4
    rows[9] = {**rows[9], "rare": [1.5, 2.5]}
    records = [_example(row) for row in rows]
    batch = parser.records(tf.constant(records))
    assert decoded == [2, 1]  # the sample, then the one record holding `rare`; never the whole block
    _same_as_tfx_bsl(batch, records)


def test_a_feature_of_another_kind_or_a_record_that_is_no_example_refuses_the_block():
    parser = _parser([_example(row) for row in ROWS])
    assert _parse(parser, [_example({"n": 1.5})]) is None
    assert _parse(parser, [b"\xffnot an example"]) is None


def test_a_record_that_lacks_some_features_written_empty_and_others_not_refuses_the_block():
    """Empty entries for every feature a record lacks, or for none, are accounted for; for some only, the
    parse cannot tell which a record holds (the decoder would make those empty lists, not nulls)."""
    import tensorflow as tf

    parser = _parser([_example(row) for row in ROWS])
    some_empty = _example({"n": 1, "x": tf.train.Feature()})  # lacks word and many, x written empty
    assert _parse(parser, [some_empty]) is None
