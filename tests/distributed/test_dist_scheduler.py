"""``--dist gpu``'s scheduler (``dist.scheduler.GpuScheduling``) driven directly, as xdist's DSession drives it: the
workers are stand-ins that record what they are sent (tests/_xdist_standin.py: no gateways, no ssh).

The calls follow xdist's dsession.py: ``worker_errordown`` removes a crashed worker (``remove_node``),
then ``pytest_handlecrashitem`` may ``mark_test_pending`` the crashed test, then xdist starts a
replacement that is added, collects and is scheduled; ``worker_workerfinished`` removes a worker that
finished after its ``shutdown``.
"""

import pytest

pytest.importorskip("xdist")

from _xdist_standin import Worker, scheduler, start

from pytest_gpuenv.dist.scheduler import NodeRoutes

TESTS = [f"t.py::test_{i}" for i in range(4)]


@pytest.mark.parametrize("rerun", [False, True])
def test_a_crashed_worker_s_tests_wait_for_its_replacement_not_for_a_worker_shutting_down(rerun):
    """Four tests, two workers of one host: each is sent two and told to shut down. gw1 dies in its first
    test: its second must not be queued for gw0, which runs nothing more, and then be reported "not run"
    when gw0 finishes; it waits for gw1's replacement (with the crashed test too, where a rerun plugin
    sends it back)."""
    sched = scheduler(["2*popen"], lambda node: NodeRoutes("hostA", {}, {}))
    hook = sched.config.hook
    gw0, gw1 = Worker("gw0"), Worker("gw1")
    start(sched, (gw0, gw1), TESTS)
    assert (gw0.sent, gw1.sent) == ([0, 1], [2, 3]) and gw0.shutting_down and gw1.shutting_down
    assert sched.remove_node(gw1) == TESTS[2]  # worker_errordown
    if rerun:
        sched.mark_test_pending(TESTS[2])  # pytest_handlecrashitem of a rerun plugin
    for i in (0, 1):
        sched.mark_test_complete(gw0, i)
    assert sched.remove_node(gw0) is None  # worker_workerfinished
    assert hook.reports("failed") == [] and not sched.tests_finished
    gw2 = Worker("gw2")  # xdist's replacement of gw1
    start(sched, [gw2], TESTS)
    assert sorted(gw2.sent) == ([2, 3] if rerun else [3])
    for i in list(gw2.sent):
        sched.mark_test_complete(gw2, i)
    assert sched.tests_finished and gw2.shutting_down and hook.reports("failed") == []


def test_a_worker_that_died_keeps_its_queued_tests_until_its_removal():
    """Two hosts: gwA runs tests 0-1 only, gwN tests 2-7 only. gwN dies while tests 4-7 are still queued for
    it; xdist's receiving thread marks it ``shutting_down`` at once, before the controller's loop removes it.
    If gwA finishes in between, its removal must not report gwN's queued tests "not run": they wait for gwN's
    removal and then for its replacement (seen once in CI, where the two events came in that order)."""
    tests = [f"t.py::test_{i}" for i in range(8)]
    cannot = {"A": {i: ("no-gpu", "x", "needs NVIDIA", ("t.py", 0, f"test_{i}")) for i in range(2, 8)},
              "N": {i: ("no-gpu", "x", "needs AMD", ("t.py", 0, f"test_{i}")) for i in range(2)}}
    sched = scheduler(["1*popen", "1*popen"], lambda node: NodeRoutes(node.gateway.id[2], cannot[node.gateway.id[2]], {}))
    hook = sched.config.hook
    gwA, gwN = Worker("gwA"), Worker("gwN")
    start(sched, (gwA, gwN), tests)
    assert gwA.sent == [0, 1] and gwA.shutting_down and gwN.sent == [2, 3] and not gwN.shutting_down
    gwN.shutting_down = True  # it died: xdist's receiving thread marks it down before the event is handled
    for i in (0, 1):
        sched.mark_test_complete(gwA, i)
    assert sched.remove_node(gwA) is None  # worker_workerfinished, handled first
    assert hook.reports("failed") == []
    assert sched.remove_node(gwN) == tests[2]  # worker_errordown
    replacement = Worker("gwN2")
    start(sched, [replacement], tests)
    assert replacement.sent and set(replacement.sent) <= {3, 4, 5, 6, 7} and hook.reports("failed") == []
