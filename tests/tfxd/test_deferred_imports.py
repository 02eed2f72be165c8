"""What tfxd.deferred_imports puts off, judged by the library's own module imported without tfxd in a fresh
process: Beam's Google Cloud connectors (every name apache_beam.io binds is read from the deferred one, the
same objects, while importing Beam after tfxd imports no google.cloud.bigquery; a direct import of the connector
is never refused), TFX's tfx.components package (its __init__ run as TFX wrote it at the first read of a
name), TFMA's Rouge metric and SciPy's stats package as TFMA imports it, IPython's package, TFMA's views,
Beam's GCS filesystem and Google's Pub/Sub client package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

BEAMS_OWN = """
    import json
    import apache_beam.io as io
    print(json.dumps(sorted(name for name in vars(io) if not name.startswith("_"))))
"""
DEFERRED = """
    import json, sys
    import tfxd
    import apache_beam as beam
    before = "google.cloud.bigquery" in sys.modules
    own = {name for name in vars(beam.io) if not name.startswith("_")}
    read = {name: getattr(beam.io, name) for name in json.loads(sys.argv[1])}  # deferred ones: __getattr__
    from apache_beam.io.gcp import bigquery, pubsub
    same = read["ReadFromBigQuery"] is bigquery.ReadFromBigQuery and read["WriteToPubSub"] is pubsub.WriteToPubSub
    try:
        beam.io.NoSuchConnector
        missing = None
    except AttributeError as exc:
        missing = str(exc)
    print(json.dumps({"before": before, "own": sorted(own), "same": same, "missing": missing,
                      "after": "google.cloud.bigquery" in sys.modules}))
"""


def _python(code: str, *args: str, timeout: int = 300, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def test_every_name_beam_binds_is_read_from_the_deferred_io():
    beams = json.loads(_python(BEAMS_OWN))  # Beam's own __init__, tfxd not imported
    assert {"ReadFromBigQuery", "WriteToBigQuery", "ReadFromPubSub", "gcsio", "ReadFromText"} <= set(beams)
    outcome = json.loads(_python(DEFERRED, json.dumps(beams)))
    assert outcome["before"] is False  # importing Beam after tfxd left BigQuery's client out
    assert "ReadFromBigQuery" not in outcome["own"] and "ReadFromText" in outcome["own"]
    assert outcome["same"] and outcome["after"] is True
    assert outcome["missing"] == "module 'apache_beam.io' has no attribute 'NoSuchConnector'"


def test_a_direct_import_of_the_connector_is_not_refused():
    assert _python("""
        import tfxd
        import apache_beam
        import apache_beam.io.gcp.bigquery as bigquery
        print(bigquery.WriteToBigQuery.__name__)
    """) == "WriteToBigQuery"


TFXS_OWN_COMPONENTS = """
    import json, sys
    import tfx.components as components
    print(json.dumps({"all": components.__all__, "doc": components.__doc__,
                      "names": sorted(name for name in vars(components) if not name.startswith("_")),
                      "classes": {name: [getattr(components, name).__module__, getattr(components, name).__qualname__]
                                  for name in components.__all__},
                      "tuner_imported": "keras_tuner" in sys.modules}))
"""
DEFERRED_COMPONENTS = """
    import json, sys
    import tfxd
    import tfxd.pipeline.run.local_run
    import tfxd.components.example_gen.executor, tfxd.components.statistics_gen.executor
    import tfxd.components.transform.executor, tfxd.components.trainer.executor, tfxd.components.evaluator.executor
    import tfx.components as components
    left_out = [name for name in ("keras_tuner", "keras", "kubernetes", "apache_beam.ml", "nltk", "sklearn")
                if name in sys.modules]
    before = sorted(name for name in vars(components) if not name.startswith("_"))
    doc, listed = components.__doc__, components.__all__
    from tfx.components.tuner.component import Tuner
    read = {name: getattr(components, name) for name in listed}  # the first read runs TFX's __init__
    print(json.dumps({"left_out": left_out, "before": before, "all": listed, "doc": doc,
                      "names": sorted(name for name in vars(components) if not name.startswith("_")),
                      "classes": {name: [value.__module__, value.__qualname__] for name, value in read.items()},
                      "same": read["Tuner"] is Tuner, "dir": sorted(set(listed) - set(dir(components)))}))
"""
STAR = """
    import json
    import tfxd
    import tfx.components.evaluator.constants
    from tfx.components import *
    print(json.dumps(sorted(name for name in globals() if name[0].isupper())))
"""


def test_tfx_components_init_runs_as_tfx_wrote_it_at_the_first_read_of_a_name():
    """Judged by TFX's tfx.components imported without tfxd: the same __all__, docstring, names and classes, once
    one is read; until then a run's imports (the local runner, tfxd's executors) leave the Tuner's keras_tuner,
    Keras 3, the Kubernetes client, Beam's RunInference and NLTK (TFMA's Rouge) out. Biting: TFX's own import loads keras_tuner."""
    tfxs = json.loads(_python(TFXS_OWN_COMPONENTS))
    assert tfxs["tuner_imported"] is True and "Trainer" in tfxs["all"]
    deferred = json.loads(_python(DEFERRED_COMPONENTS))
    assert deferred["left_out"] == []
    assert "Trainer" not in deferred["before"] and "Tuner" not in deferred["before"]
    assert deferred["all"] == tfxs["all"] and deferred["doc"] == tfxs["doc"]
    assert deferred["classes"] == tfxs["classes"] and deferred["same"] is True
    assert set(tfxs["names"]) <= set(deferred["names"]) and deferred["dir"] == []


def test_a_star_import_of_tfx_components_binds_every_listed_class():
    assert json.loads(_python(STAR)) == sorted(json.loads(_python(TFXS_OWN_COMPONENTS))["all"])


def test_an_init_that_does_more_than_import_names_runs_at_once():
    import ast

    from tfxd.deferred_imports import _only_imports_listed

    listed = '"""Doc."""\nfrom tfx.a import B\nfrom tfx.c import D\n__all__ = ["B", "D"]\n'
    assert _only_imports_listed(ast.parse(listed)) == ["B", "D"]
    for other in ("import os\n", "B = 1\n", "from . import b\n", "if True:\n    pass\n", "__all__ = names()\n"):
        assert _only_imports_listed(ast.parse(listed + other)) is None, other


ROUGE = """
    import json, sys
    {tfxd}
    import tensorflow_model_analysis as tfma
    from tensorflow_model_analysis.metrics import metric_specs, metric_types
    imported = "nltk" in sys.modules
    listed_before = sorted(metric_types.registered_metrics())
    others = [metric_types.is_registered_metric("BinaryAccuracy"), "AUC" in metric_types.registered_metrics(),
              "NoSuchMetric" in metric_types.registered_metrics(), metric_types.is_registered_metric("NoSuch")]
    quiet = "nltk" not in sys.modules
    config = tfma.MetricConfig(class_name="Rouge", config=json.dumps({{"rouge_type": "rouge2"}}))
    made = metric_specs.metric_instance(config)  # TFMA's own path from an EvalConfig's metric to its class
    cls = metric_types.registered_metrics()["Rouge"]
    print(json.dumps({{"imported": imported, "quiet": quiet, "others": others,
                      "rouge_before": "Rouge" in listed_before, "made": [type(made).__module__, type(made).__name__,
                      made.name, made.get_config()], "same": cls is tfma.metrics.rouge.Rouge,
                      "listed": sorted(metric_types.registered_metrics()),
                      "registered": metric_types.is_registered_metric("Rouge"), "now": "nltk" in sys.modules}}))
"""


def test_tfmas_rouge_runs_when_it_is_asked_for_as_tfma_would_make_it():
    """Judged by TFMA imported without tfxd (which imports NLTK at once: the judge bites on that): importing TFMA
    after tfxd leaves NLTK out while other metrics are looked up; TFMA's own metric_instance makes the same Rouge
    from an EvalConfig's metric, the registry then lists what TFMA's own lists, and the class is the module's."""
    tfmas = json.loads(_python(ROUGE.format(tfxd="")))
    assert tfmas["imported"] is True and tfmas["rouge_before"] is True
    deferred = json.loads(_python(ROUGE.format(tfxd="import tfxd")))
    assert deferred["imported"] is False and deferred["quiet"] is True and deferred["rouge_before"] is False
    assert deferred["others"] == tfmas["others"] == [True, True, False, False]
    assert deferred["made"] == tfmas["made"] and deferred["made"][1] == "Rouge" and deferred["made"][2] == "rouge2"
    assert deferred["listed"] == tfmas["listed"] and deferred["same"] is True and deferred["registered"] is True
    assert deferred["now"] is True


def test_dir_of_the_rouge_module_runs_it():
    assert _python("""
        import sys
        import tfxd
        from tensorflow_model_analysis.metrics import metric_types, rouge
        before = "nltk" in sys.modules
        names = dir(rouge)
        print(before, "Rouge" in names, "nltk" in sys.modules, rouge.Rouge is metric_types.registered_metrics()["Rouge"])
    """) == "False True True True"


def test_a_rouge_module_that_registers_nothing_runs_at_once():
    import ast

    from tfxd.deferred_imports import _registered_by

    source = "from m import metric_types\nclass Rouge: pass\nmetric_types.register_metric(Rouge)\n"
    assert _registered_by(ast.parse(source)) == {"Rouge"}
    assert _registered_by(ast.parse("class Rouge: pass\n")) == frozenset()


SCIPY_STATS = """
    import json, sys
    {tfxd}
    import tensorflow_model_analysis as tfma
    from tensorflow_model_analysis.api import types
    from tensorflow_model_analysis.utils import math_util
    imported = "scipy.stats._stats_py" in sys.modules
    value = types.ValueWithTDistribution(sample_mean=0.8, sample_standard_deviation=0.02,
                                         sample_degrees_of_freedom=19, unsampled_value=0.81)
    interval = [float(bound) for bound in math_util.calculate_confidence_interval(value)]  # TFMA's own use
    from scipy.stats import norm, t
    import scipy.stats
    print(json.dumps({{"imported": imported, "interval": interval, "norm": float(norm.cdf(1.0)),
                      "same": t is scipy.stats.t and t is math_util.stats.t, "names": dir(scipy.stats),
                      "now": "scipy.stats._stats_py" in sys.modules}}))
"""


def test_scipy_stats_runs_when_tfma_first_reads_it_as_without_tfxd():
    """Judged by TFMA imported without tfxd (which imports SciPy's stats package at once: the judge bites on
    that): after tfxd, TFMA's import (any import of the package) leaves its __init__ unrun, and TFMA's own confidence interval,
    names imported from the package and its dir are what they are without tfxd."""
    tfmas = json.loads(_python(SCIPY_STATS.format(tfxd="")))
    assert tfmas["imported"] is True
    deferred = json.loads(_python(SCIPY_STATS.format(tfxd="import tfxd")))
    assert deferred["imported"] is False and deferred["now"] is True and deferred["same"] is True
    assert deferred["interval"] == tfmas["interval"] and deferred["interval"][1] < 0.8 < deferred["interval"][2]
    assert deferred["norm"] == tfmas["norm"]
    assert set(deferred["names"]) - set(tfmas["names"]) == {"__getattr__", "__dir__"}  # the deferral's own
    assert set(tfmas["names"]) <= set(deferred["names"])


def test_a_body_that_imports_its_own_submodules_runs_once_without_waiting_on_itself():
    """scipy/stats/__init__.py imports submodules that import names from the package (``from scipy.stats
    import distributions`` inside _stats_py): read while the body runs, the package answers what it has bound
    so far, as Python's own import does, instead of waiting for its own body."""
    assert _python("""
        import sys
        import tfxd
        import scipy
        from tfxd import deferred_imports
        import scipy.stats as stats  # deferred (tfxd imported first)
        before = "scipy.stats._stats_py" in sys.modules
        print(before, stats.ttest_ind.__module__, "scipy.stats.distributions" in sys.modules)
    """, timeout=120) == "False scipy.stats._stats_py True"


IPYTHON = """
    import json, sys
    {tfxd}
    import tensorflow_data_validation
    from tensorflow_data_validation.utils import display_util
    shell = "IPython.terminal.interactiveshell" in sys.modules
    import IPython.display
    import IPython
    same = display_util.display is IPython.display.display and display_util.HTML is IPython.display.HTML
    html = display_util.HTML("<b>tfxd</b>").data
    from apache_beam.utils.interactive_utils import is_in_ipython
    beams = is_in_ipython()  # Beam asks at every pipeline's run: IPython.get_ipython
    get_ipython = IPython.get_ipython
    none = get_ipython() is None
    asked = "IPython.terminal.interactiveshell" in sys.modules
    core_shell = "IPython.core.interactiveshell" in sys.modules
    embed = IPython.embed.__module__
    names = sorted(name for name in vars(IPython) if not name.startswith("_"))
    from IPython.core.interactiveshell import InteractiveShell
    made = InteractiveShell.instance()  # a shell now exists: get_ipython, read before or now, answers it
    print(json.dumps({{"shell": shell, "same": same, "html": html, "beams": beams, "none": none,
                      "asked": asked, "core_shell": core_shell, "names": names, "embed": embed,
                      "made": get_ipython() is made and IPython.get_ipython() is made and is_in_ipython(),
                      "now": "IPython.terminal.interactiveshell" in sys.modules}}))
"""


def test_ipythons_init_runs_when_a_name_is_read_from_it_as_without_tfxd(tmp_path):
    """Judged by TFDV imported without tfxd (which imports IPython's terminal shell at once: the judge bites on
    that): after tfxd, TFDV's display_util holds IPython's own display and HTML, with IPython's package
    __init__ unrun until a name is read from it, get_ipython (Beam's question) answered without it; then the
    package binds what it binds without tfxd; get_ipython answers the shell once one is made."""
    ipython_dir = {"IPYTHONDIR": str(tmp_path)}  # the shell's history database goes there
    own = json.loads(_python(IPYTHON.format(tfxd=""), env=ipython_dir))
    assert own["shell"] is True
    deferred = json.loads(_python(IPYTHON.format(tfxd="import tfxd"), env=ipython_dir))
    assert deferred["shell"] is False and deferred["same"] is True and deferred["html"] == own["html"] == "<b>tfxd</b>"
    assert deferred["beams"] is own["beams"] is False and deferred["none"] is True and deferred["asked"] is False
    assert deferred["core_shell"] is False  # Beam's question did not import IPython's shell to answer None
    assert deferred["made"] is own["made"] is True  # once a shell exists, it is the answer, as IPython's own
    assert deferred["now"] is True and deferred["embed"] == own["embed"]
    assert set(deferred["names"]) == set(own["names"]) and "get_ipython" in own["names"]


TFMA_VIEWS = """
    import json, sys
    {tfxd}
    import tensorflow_model_analysis as tfma
    from tensorflow_model_analysis.view import util, view_types  # submodules, as TFMA's own modules import them
    widgets = "ipywidgets" in sys.modules
    result = tfma.EvalResult is view_types.EvalResult and util.get_slicing_metrics.__module__
    render = tfma.view.render_slicing_metrics
    names = sorted(name for name in vars(tfma.view) if not name.startswith("_"))
    print(json.dumps({{"widgets": widgets, "result": result, "render": render.__module__, "names": names,
                      "now": "ipywidgets" in sys.modules}}))
"""


def test_tfmas_views_run_when_one_is_read_and_its_submodules_import_without_them():
    """Judged by TFMA imported without tfxd (which imports Jupyter's widgets at once: the judge bites on that):
    after tfxd, TFMA's view submodules import while the package's __init__ waits; reading a view runs it, and
    the package then binds what it binds without tfxd."""
    own = json.loads(_python(TFMA_VIEWS.format(tfxd="")))
    assert own["widgets"] is True
    deferred = json.loads(_python(TFMA_VIEWS.format(tfxd="import tfxd")))
    assert deferred["widgets"] is False and deferred["now"] is True
    assert deferred["result"] == own["result"] == "tensorflow_model_analysis.view.util"
    assert deferred["render"] == own["render"] == "tensorflow_model_analysis.view.widget_view"
    assert set(own["names"]) <= set(deferred["names"]) and "render_time_series" in own["names"]


GCS = """
    import json, sys
    {tfxd}
    from apache_beam.io.filesystems import FileSystems
    before = "apache_beam.io.gcp.gcsfilesystem" in sys.modules
    local = type(FileSystems.get_filesystem("/tmp/data.csv")).__name__
    after_local = "apache_beam.io.gcp.gcsfilesystem" in sys.modules
    gcs = FileSystems.get_filesystem("gs://bucket/data.csv")
    from apache_beam.io.gcp.gcsfilesystem import GCSFileSystem
    try:
        FileSystems.get_filesystem("nosuch://bucket/data.csv")
        unknown = None
    except ValueError as exc:
        unknown = str(exc)
    print(json.dumps({{"before": before, "local": local, "after_local": after_local, "gcs": type(gcs).__name__,
                      "same": type(gcs) is GCSFileSystem, "join": gcs.join("gs://bucket", "a", "b"),
                      "unknown": unknown}}))
"""


def test_beams_gcs_filesystem_is_imported_at_the_first_gs_path_as_without_tfxd(capfd):
    """Judged by Beam imported without tfxd (which imports its GCS filesystem at once: the judge bites on that):
    after tfxd, a local path needs no GCS filesystem, and the first gs:// path gets Beam's own, registered as
    Beam registers it; a scheme Beam has no filesystem for is refused as before. Beam logs nothing of it."""
    own = json.loads(_python(GCS.format(tfxd="")))
    assert own["before"] is True
    deferred = json.loads(_python(GCS.format(tfxd="import tfxd")))
    assert deferred["before"] is False and deferred["after_local"] is False
    for key in ("local", "gcs", "same", "join", "unknown"):
        assert deferred[key] == own[key], key
    assert deferred["gcs"] == "GCSFileSystem" and deferred["join"] == "gs://bucket/a/b"
    assert "Unable to get filesystem from specified path" in deferred["unknown"]
    done = subprocess.run([sys.executable, "-c", "import tfxd\nimport apache_beam.io.filesystems"],
                          capture_output=True, text=True, timeout=120)
    assert "GCSFileSystem" not in done.stderr and "Failed to import" not in done.stderr


def test_a_thread_asking_for_a_gs_path_while_another_imports_the_filesystem_gets_it():
    """An SDK worker's bundles ask from several threads: one imports the deferred module while another finds
    it in sys.modules before its class is registered (the CI failure of a569a4d: "Unable to get filesystem
    from specified path" on Flink's workers). Here the first thread's import is held inside the module's
    body (at its import of gcsio) until the second has asked; the second must get the filesystem too."""
    assert _python("""
        import importlib.abc, sys, threading, time
        import tfxd
        from apache_beam.io.filesystems import FileSystems
        inside, found = threading.Event(), {}

        class HoldGcsio(importlib.abc.MetaPathFinder):  # the first thread, inside gcsfilesystem's body
            def find_spec(self, name, path, target=None):
                if name == "apache_beam.io.gcp.gcsio" and not inside.is_set():
                    inside.set()
                    time.sleep(1.0)
                return None

        sys.meta_path.insert(0, HoldGcsio())

        def ask(who):
            try:
                found[who] = type(FileSystems.get_filesystem("gs://bucket/data.csv")).__name__
            except ValueError as exc:
                found[who] = str(exc)[:48]

        first = threading.Thread(target=ask, args=("first",))
        first.start()
        inside.wait(30)
        second_sees = "apache_beam.io.gcp.gcsfilesystem" in sys.modules
        ask("second")
        first.join()
        print(second_sees, found["first"], found["second"])
    """) == "True GCSFileSystem GCSFileSystem"


PUBSUB = """
    import json, sys
    {tfxd}
    import apache_beam as beam
    from apache_beam.io.gcp import pubsub  # as Beam's DirectRunner imports it at every pipeline's run
    with beam.Pipeline() as pipeline:
        _ = pipeline | beam.Create([1]) | beam.Map(lambda x: x)
    clients = "google.cloud.pubsub_v1.publisher.client" in sys.modules
    message = pubsub.PubsubMessage(b"tfxd", {{"k": "v"}}, ordering_key="o")
    again = pubsub.PubsubMessage._from_proto_str(message._to_proto_str(for_publish=True))
    from google.cloud import pubsub as google_pubsub
    print(json.dumps({{"clients": clients, "same": again == message, "data": again.data.decode(),
                      "publisher": google_pubsub.PublisherClient.__module__,
                      "names": sorted(name for name in dir(google_pubsub) if not name.startswith("_")),
                      "now": "google.cloud.pubsub_v1.publisher.client" in sys.modules}}))
"""


def test_pubsubs_init_waits_until_beams_connector_uses_it_as_without_tfxd(tmp_path):
    """Judged by Beam's Pub/Sub connector imported without tfxd (which imports Google's publisher and
    subscriber clients at once: the judge bites on that): after tfxd, a pipeline runs without them, and the
    connector's message, which reads google.cloud.pubsub's types, goes to its proto and back as without tfxd;
    the package then binds what it binds without tfxd."""
    scratch = {"TMPDIR": str(tmp_path)}  # the pipeline's own temporary files
    own = json.loads(_python(PUBSUB.format(tfxd=""), env=scratch))
    assert own["clients"] is True
    deferred = json.loads(_python(PUBSUB.format(tfxd="import tfxd"), env=scratch))
    assert deferred["clients"] is False and deferred["now"] is True
    assert deferred["same"] is own["same"] is True and deferred["data"] == own["data"] == "tfxd"
    assert deferred["publisher"] == own["publisher"] == "google.cloud.pubsub_v1"
    assert deferred["names"] == own["names"] and "SubscriberClient" in own["names"]
