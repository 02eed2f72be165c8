"""The exit task of every pipeline tfxd compiles for Kubeflow Pipelines and Vertex AI (kubeflow/compile.py):
it runs after the pipeline's tasks whatever their end (TFX's exit handler: `ALL_UPSTREAM_TASKS_COMPLETED`)
and rewrites the pipeline's history.html from the records every run's tasks left (pipeline/run/
cluster_history.py), so that the page beside the pipeline root is as new as the last run, as a local run's is.

`python -m tfxd.kubeflow.history_task --pipeline NAME --page PATH --push-to PATH --thresholds JSON
--run-page URI`: ``--run-page`` is the task's output artifact, in its run's folder; the runs are read from the
folder that holds the run folders, the pushed versions from ``--push-to``. A page that cannot be written is
said in the log and the task still ends 0: the run's outcome is its tasks', never the page's.
"""

from __future__ import annotations

import argparse
import json
import posixpath
import sys

from tfxd import keys
from tfxd.files import join
from tfxd.pipeline.report import history_page
from tfxd.pipeline.run import cluster_history
from tfxd.task_record import run_folder


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="history_task", description=__doc__.split("\n\n")[0])
    parser.add_argument("--pipeline", required=True)
    parser.add_argument("--page", required=True, help="where history.html goes")
    parser.add_argument("--push-to", required=True, help="where the pipeline pushes its models")
    parser.add_argument("--thresholds", required=True, help="evaluation.thresholds of the spec, as JSON")
    parser.add_argument("--run-page", required=True, help="this task's output artifact (a folder)")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = _parse(argv)
    folder = run_folder(args.run_page, keys.HISTORY_TASK)
    if folder is None:
        print(f"tfxd: {args.run_page} is in no folder of task {keys.HISTORY_TASK}: no run folder, no page",
              file=sys.stderr)
        return 0
    try:
        found = cluster_history.runs(posixpath.dirname(folder), args.pipeline, args.push_to)
        thresholds = json.loads(args.thresholds)
        for path in (args.page, join(args.run_page, keys.HISTORY_PAGE)):
            history_page.write(path, args.pipeline, found, thresholds, reports=False)
    except Exception as exc:  # noqa: BLE001 - the run's outcome is its tasks'; the page waits for the next run
        print(f"tfxd: could not write the history page {args.page}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 0
    print(f"tfxd: history of {args.pipeline}, {len(found)} runs: {args.page}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
