"""Blaming the right replica: the peer TensorFlow says it lost, read from the reporter's log (the lines are
TensorFlow 2.16's own, from a local 2-worker cluster whose worker 1 was frozen with SIGSTOP), and what the
local cluster says with real processes in each state: frozen, alive, killed."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

from tfxd.components.trainer import local_cluster, peer_blame
from tfxd.components.trainer.replica_hosts import ReplicaHosts

# worker-0's log when worker-1 was frozen (tsl coordination_service_agent.cc, then the aborted collective)
AGENT = ("E0000 00:00:1796218348.913381   20038 coordination_service_agent.cc:749] Coordination agent is set to "
         "ERROR: UNAVAILABLE: Error reported from /job:worker/task:1: Task /job:worker/replica:0/task:1 heartbeat "
         "timeout. This indicates that the remote task has failed, got preempted, or crashed unexpectedly. Check "
         "the task logs for an earlier error to debug further. [type.googleapis.com/tensorflow.CoordinationService"
         "Error='\"\\n\\n\\x06worker\\x10\\x01']")
ABORTED = ("tensorflow.python.framework.errors_impl.UnavailableError: {{function_node __wrapped__CollectiveReduceV2_"
           "Nordering_token_1_device_/job:worker/replica:0/task:0/device:CPU:0}} Collective ops is aborted by: Error "
           "reported from /job:worker/task:1: Task /job:worker/replica:0/task:1 heartbeat timeout. This indicates "
           "that the remote task has failed, got preempted, or crashed unexpectedly.")
SERVICE = ("E1202 coordination_service.cc:512] Stopping coordination service as the following tasks are unhealthy "
           "(stopped sending heartbeats):\n/job:chief/replica:0/task:0\nCheck the task logs for an earlier error.")


def test_the_peer_tensorflow_lost_is_read_from_the_reporters_log():
    lost = peer_blame.lost_peer("\n".join(["Enabled multi-worker collective ops with available devices: "
                                           "['/job:worker/replica:0/task:0/device:CPU:0', "
                                           "'/job:worker/replica:0/task:1/device:CPU:0']", AGENT, ABORTED]), "worker-0")
    assert lost == peer_blame.Lost("worker-1", "Task /job:worker/replica:0/task:1 heartbeat timeout")
    assert peer_blame.lost_peer(SERVICE, "worker-0") == peer_blame.Lost(
        "chief-0", "following tasks are unhealthy (stopped sending heartbeats): /job:chief/replica:0/task:0")
    # the reporter itself is never its own cause; a log that names no lost peer names none
    assert peer_blame.lost_peer(AGENT, "worker-1") is None
    assert peer_blame.lost_peer("ValueError: bad input\nTraceback ...", "worker-0") is None


@pytest.fixture
def processes(tmp_path):
    """Real processes in the states a cluster's can be in, each with its log; all gone afterwards."""
    made: list[tuple[str, str, subprocess.Popen]] = []

    def make(name: str, command: str, log: str = "") -> tuple[str, str, subprocess.Popen]:
        path = tmp_path / f"trainer-{name}.log"
        path.write_text(log)
        made.append((name, str(path), subprocess.Popen(["sh", "-c", command])))
        return made[-1]

    yield make
    for _, _, process in made:
        if process.poll() is None:
            process.kill()
        process.wait()


def test_a_frozen_peer_is_named_as_the_cause_and_the_failed_process_as_its_reporter(processes):
    reporter = processes("worker-0", "exit 1", log=AGENT + "\n" + ABORTED)
    frozen = processes("worker-1", "sleep 60")
    frozen[2].send_signal(signal.SIGSTOP)
    while peer_blame.process_state(frozen[2].pid) is None:  # the kernel stops it at its next scheduling
        time.sleep(0.01)
    reporter[2].wait()
    message = local_cluster._failure([reporter], [reporter, frozen])
    assert message.startswith(f"Trainer process worker-1 (pid {frozen[2].pid}) was frozen (stopped by a signal): "
                              "TensorFlow lost it (Task /job:worker/replica:0/task:1 heartbeat timeout); its log: "
                              f"{frozen[1]}. Reported by worker-0 (pid {reporter[2].pid}), which exited with code 1; "
                              f"its log: {reporter[1]}; stopped the others (worker-1)"), message


def test_an_alive_peer_that_stopped_answering_is_named_so(processes):
    reporter = processes("worker-0", "exit 1", log=ABORTED)
    silent = processes("worker-1", "sleep 60")
    reporter[2].wait()
    message = local_cluster._failure([reporter], [reporter, silent])
    assert message.startswith(f"Trainer process worker-1 (pid {silent[2].pid}) stopped answering while alive "
                              "(hung, or cut off from the others): TensorFlow lost it"), message


def test_a_killed_process_is_the_cause_whoever_reported_it(processes):
    reporter = processes("worker-0", "exit 1", log=ABORTED)
    killed = processes("worker-1", "sleep 60")
    killed[2].kill()
    for _, _, process in (reporter, killed):
        process.wait()
    message = local_cluster._failure([reporter, killed], [reporter, killed])
    assert message.startswith(f"Trainer process worker-1 (pid {killed[2].pid}) was killed by signal 9 (SIGKILL"), message
    assert "Reported by" not in message


def test_without_a_lost_peer_the_failed_process_is_the_cause(processes):
    failed = processes("worker-1", "exit 2", log="ValueError: a bad feature\n")
    other = processes("worker-0", "sleep 60")
    failed[2].wait()
    message = local_cluster._failure([failed], [other, failed])
    assert message == (f"Trainer process worker-1 (pid {failed[2].pid}) exited with code 2; its log: {failed[1]}; "
                       "stopped the others (worker-0)")


def test_on_hosts_of_their_own_the_replica_whose_link_is_down_is_the_cause_whichever_side_exited(processes):
    """Each side of a cut link loses the other (worker 1's log, when its own link was cut, names the leader
    worker 0 as unreachable): the link's state says which side was cut, and that one is named."""
    with ReplicaHosts({"worker-0": "worker-0", "worker-1": "worker-1"}) as hosts:
        subprocess.run(["ip", "link", "set", hosts.hosts["worker-1"].link, "down"], check=True)
        cut = processes("worker-1", "exit 1", log="DeadlineExceededError: ... /tensorflow.CoordinationService/Heartbeat")
        reporter = processes("worker-0", "exit 1", log=ABORTED)
        for _, _, process in (cut, reporter):
            process.wait()
        link = hosts.hosts["worker-1"].link
        assert local_cluster._failure([cut, reporter], [reporter, cut], hosts).startswith(
            f"Trainer process worker-1 (pid {cut[2].pid}) was cut off from the others (its host's link {link} is "
            f"down) and exited with code 1; its log: {cut[1]}")
        alive = processes("worker-1", "sleep 60")
        message = local_cluster._failure([reporter], [reporter, alive], hosts)
        assert message.startswith(
            f"Trainer process worker-1 (pid {alive[2].pid}) was cut off from the others (its host's link {link} is "
            "down): TensorFlow lost it (Task /job:worker/replica:0/task:1 heartbeat timeout); its log: "
            f"{alive[1]}. Reported by worker-0 (pid {reporter[2].pid}), which exited with code 1"), message
        # the link up again: TensorFlow's word decides, as on loopback
        subprocess.run(["ip", "link", "set", link, "up"], check=True)
        assert "stopped answering while alive" in local_cluster._failure([reporter], [reporter, alive], hosts)
