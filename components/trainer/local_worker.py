"""One process of a local Trainer cluster: `python -m components.trainer.local_worker PAYLOAD`."""

from __future__ import annotations

import pickle
import sys

from pipeline import tf_env  # noqa: F401  (before TensorFlow)


def main(path: str) -> None:
    from absl import logging

    from components.trainer.executor import Executor

    logging.use_absl_handler()  # this process's log file is its stderr: keep TFX's INFO lines there
    logging.set_verbosity(logging.INFO)

    with open(path, "rb") as handle:
        input_dict, output_dict, exec_properties = pickle.load(handle)
    Executor().train(input_dict, output_dict, exec_properties)


if __name__ == "__main__":
    main(sys.argv[1])
