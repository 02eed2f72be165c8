"""One process of a local Trainer cluster: `python -m tfxd.components.trainer.local_worker`, reading the
pickled (input_dict, output_dict, exec_properties) on stdin."""

from __future__ import annotations

import os
import pickle
import sys
import threading
import time

from tfxd.components.trainer.local_cluster import PARENT_ENV


def exit_with_parent(interval: float = 1.0) -> None:
    """Stop this process when the tfxd that started it is gone (killed, crashed): an orphaned worker
    would train on, or wait forever on a collective, holding its port and CPUs."""
    parent = int(os.environ.get(PARENT_ENV) or os.getppid())  # tfxd may be gone before this line

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        sys.stderr.write(f"tfxd: the process that started this Trainer worker (pid {parent}) is gone; "
                         "stopping\n")
        sys.stderr.flush()
        os._exit(1)

    threading.Thread(target=watch, name="tfxd-parent-watch", daemon=True).start()


def main() -> None:
    exit_with_parent()
    # start-up: the parent watch runs before TensorFlow's seconds-long import, not after it
    from absl import logging

    from tfxd.components.trainer.executor import Executor

    logging.use_absl_handler()  # this process's log file is its stderr: keep TFX's INFO lines there
    logging.set_verbosity(logging.INFO)

    input_dict, output_dict, exec_properties = pickle.load(sys.stdin.buffer)
    Executor().train(input_dict, output_dict, exec_properties)


if __name__ == "__main__":
    main()
