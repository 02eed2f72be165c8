"""The ``tfxd`` command line: the group, its global options, and the verbs of local.py and cluster.py."""

from __future__ import annotations

import os

import click

from tfxd import quick_exit, tf_env  # quick_exit's import: no last collections at exit
from tfxd.cli import cluster, local


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tfxd", prog_name="tfxd")
@click.option("-v", "--verbose", is_flag=True, help="Show everything, TensorFlow and Beam logs included.")
def cli(verbose: bool) -> None:
    """tfxd: one YAML file -> a TFX pipeline that runs locally, on Kubeflow and on Vertex AI."""
    if verbose:
        os.environ[tf_env.VERBOSE_ENV] = "1"
        tf_env.configure(verbose=True)


for verb in (local.init, local.validate, local.render, local.schema, local.graph, local.plan, local.run, local.history,
             cluster.compile_, cluster.submit, cluster.schedule, cluster.replay, cluster.kubeflow_manifest):
    cli.add_command(verb)


def main() -> None:
    try:
        cli(prog_name="tfxd")
    except SystemExit as done:  # click ends every command so, its status in it
        quick_exit.ended(done.code)
