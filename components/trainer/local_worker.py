"""One process of a local Trainer cluster: `python -m tfxd.components.trainer.local_worker`, reading the
pickled (input_dict, output_dict, exec_properties) on stdin."""

from __future__ import annotations

import ctypes
import os
import pickle
import signal
import sys
import threading
import time

from tfxd.components.trainer.local_cluster import PARENT_ENV


def exit_with_parent(interval: float = 1.0) -> None:
    """Stop this process when the tfxd that started it is gone (killed, crashed): an orphaned worker
    would train on, or wait forever on a collective, holding its port and CPUs."""
    parent = int(os.environ.get(PARENT_ENV) or os.getppid())  # tfxd may be gone before this line
    _kill_with_parent()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        sys.stderr.write(f"tfxd: the process that started this Trainer worker (pid {parent}) is gone; "
                         "stopping\n")
        sys.stderr.flush()
        os._exit(1)

    threading.Thread(target=watch, name="tfxd-parent-watch", daemon=True).start()


def _kill_with_parent() -> None:
    """Ask Linux to SIGKILL this process the moment its parent ends. The watch thread alone can be late:
    it needs the GIL, which a long call into TensorFlow (its import, a collective's set-up) may hold for
    longer than a killed tfxd's cleanup should take. Elsewhere the watch thread is the only guard."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL))  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux


def main() -> None:
    exit_with_parent()
    # start-up: the parent watch runs before TensorFlow's seconds-long import, not after it
    from absl import logging

    from tfxd.components.trainer.executor import Executor

    logging.use_absl_handler()  # this process's log file is its stderr: keep TFX's INFO lines there
    logging.set_verbosity(logging.INFO)

    input_dict, output_dict, exec_properties = pickle.load(sys.stdin.buffer)
    Executor().train_replica(input_dict, output_dict, exec_properties)


if __name__ == "__main__":
    main()
