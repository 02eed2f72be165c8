"""What tfxd.deferred_work puts off or skips, judged by the libraries' own code imported without tfxd in a
fresh process: google.api_core's package-name lookup (its own function's answers and its Python-version
warning, the same; importlib.metadata's packages_distributions no longer read) and TFDV's time formats
(semantic-domain statistics of the same column, the same time domain, after the module's body waited)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

WORK = """
    import datetime, json, sys, warnings
    import importlib.metadata as metadata
    calls = []
    own = metadata.packages_distributions
    metadata.packages_distributions = lambda: (calls.append(1), own())[1]  # counts api_core's lookups
    if sys.argv[1] == "tfxd":
        import tfxd
    import google.api_core
    from google.api_core import _python_version_support as support
    import tensorflow_data_validation as tfdv
    import pandas as pd
    lookups = len(calls)
    time_formats = sys.modules["tensorflow_data_validation.statistics.generators.time_stats_generator"]
    put_off = "_TIME_RE_LIST" not in vars(time_formats)
    names = {name: support._get_pypi_package_name(name)
             for name in ("google.api_core", "google.cloud.storage", "google", "protobuf")}
    with warnings.catch_warnings(record=True) as caught:  # a day Python 3.10 is past its support
        warnings.simplefilter("always")
        support.check_python_version(package="google.cloud.storage", today=datetime.date(2031, 1, 1))
    frame = pd.DataFrame({"when": ["2024-01-02 03:04:05", "2023-11-12 13:14:15"] * 60, "n": range(120)})
    stats = tfdv.generate_statistics_from_dataframe(frame, tfdv.StatsOptions(enable_semantic_domain_stats=True))
    feature = next(f for f in stats.datasets[0].features if f.path.step[-1] == "when")
    print(json.dumps({"lookups": lookups, "put_off": put_off, "names": names,
                      "warned": [str(warning.message) for warning in caught],
                      "custom": sorted(str(stat).replace(chr(10), " ") for stat in feature.custom_stats)}))
"""


def _work(importer: str) -> dict:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(WORK), importer], capture_output=True, text=True,
                          timeout=300, env=os.environ.copy())
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_libraries_answer_as_without_tfxd_with_their_work_put_off_or_skipped():
    own, deferred = _work("plain"), _work("tfxd")
    # without tfxd, api_core read every distribution to label its check and TFDV compiled its formats
    assert own["lookups"] >= 1 and own["put_off"] is False
    assert deferred["lookups"] == 0 and deferred["put_off"] is True
    # the lookup's answers: None for a dotted import name, the library's own for a top-level one
    assert own["names"]["google.api_core"] is None and own["names"]["google"]
    assert deferred["names"] == own["names"]
    assert len(own["warned"]) == 1 and "google.cloud.storage" in own["warned"][0]
    assert deferred["warned"] == own["warned"]
    # the time domain TFDV found in the column, once its body ran at the generator's first use
    assert any("time_domain" in stat and "%Y-%m-%d %H:%M:%S" in stat for stat in own["custom"]), own["custom"]
    assert deferred["custom"] == own["custom"]
