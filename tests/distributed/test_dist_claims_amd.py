"""``--dist gpu`` memory figures on AMD GPUs through amdsmi (``runtime.amdsmi.vram_held``, ``dist.gpu_memory``):
what other processes hold on each GPU, taken off its room, and what a test's process held, against its claim.
Devices come from the machine trees (an MI250X node, the MI300X machine) as detection reads them; amdsmi is a
stand-in at its call boundary (``FakeAmdSmi``), installed as the ``amdsmi`` module the plugin imports."""

import os
import sys
from types import SimpleNamespace

import pytest
from _machines import amd_machine

pytest.importorskip("xdist")

from test_dist_claims import _rotated, _run  # (the scheduler driven as xdist drives it)

from pytest_gpuenv.detect import detect
from pytest_gpuenv.marks.claims import Claim
from pytest_gpuenv.runtime import amdsmi as amd_smi

GiB = 1 << 30
#: a PID above the kernel's largest pid_max (2**22, ``PID_MAX_LIMIT`` on 64-bit): never this process nor a relative
OTHER = 2**22 + 1


class FakeAmdSmi:
    """amdsmi at its call boundary, with the names and return shapes of amdsmi's ``py-interface/amdsmi_interface.py``:

    - ``amdsmi_get_processor_handles``, ``amdsmi_get_gpu_device_bdf`` (``dddd:bb:dd.f``),
      ``amdsmi_get_gpu_device_uuid`` (``amdsmi_uuid_gen``'s form: ``runtime.amdsmi.amdsmi_uuid``);
    - ``amdsmi_get_gpu_process_list``: from ROCm 6.1 one dict per process, ``{"name", "pid", "mem",
      "engine_usage": {"gfx", "enc"}, "memory_usage": {"gtt_mem", "cpu_mem", "vram_mem"}}``, bytes (ROCm/amdsmi
      tag rocm-6.1.2, commit 05db1a0eabea62ef65c91d4d52732f4b240ba0cf; the same at 0ceca28f4139dced5e9b5739a3f393780d7add48);
      ROCm 7 adds ``cu_occupancy`` and ``evicted_time`` (ROCm/rocm-systems commit
      6fa77c7707c6592ed19783dd49cc06d443ba2fad, projects/amdsmi/py-interface/amdsmi_interface.py);
    - ``rocm60=True``: ROCm 6.0's shape, a list of process handles, each read with
      ``amdsmi_get_gpu_process_info(processor, process)`` into the dict above (ROCm/amdsmi tag rocm-6.0.2, commit
      03f638c30a9fd375c5f2193f2e23a2e4d46a6b8c).

    A failing call raises, as ``_check_res`` raises ``AmdSmiLibraryException``.

    :param gpus: (PCI bus id, serial, {pid: VRAM bytes}) per GPU.
    """

    AmdSmiInitFlags = SimpleNamespace(INIT_AMD_GPUS=2)

    def __init__(self, gpus, rocm60=False, fail=()):
        self.gpus, self.rocm60, self.fail = list(gpus), rocm60, set(fail)

    def _check(self, name):
        if name in self.fail:
            raise RuntimeError(f"{name}: AMDSMI_STATUS_NOT_SUPPORTED")

    def amdsmi_init(self, flag):
        self._check("amdsmi_init")

    def amdsmi_get_processor_handles(self):
        return [f"h{i}" for i in range(len(self.gpus))]

    def amdsmi_get_gpu_device_bdf(self, h):
        return self.gpus[int(h[1:])][0]

    def amdsmi_get_gpu_device_uuid(self, h):
        return amd_smi.amdsmi_uuid(self.gpus[int(h[1:])][1], 0x74A1)

    def _info(self, pid, vram):
        return {"name": "python3", "pid": pid, "mem": vram, "engine_usage": {"gfx": 0, "enc": 0},
                "memory_usage": {"gtt_mem": 2 << 20, "cpu_mem": 0, "vram_mem": vram},
                **({} if self.rocm60 else {"cu_occupancy": "N/A", "evicted_time": "N/A"})}

    def amdsmi_get_gpu_process_list(self, h):
        self._check("amdsmi_get_gpu_process_list")
        procs = self.gpus[int(h[1:])][2]
        if self.rocm60:
            return list(procs)  # amdsmi_process_handle_t: the PID
        return [self._info(pid, vram) for pid, vram in procs.items()]

    def amdsmi_get_gpu_process_info(self, h, process):
        if not self.rocm60:
            raise AttributeError("amdsmi_get_gpu_process_info")  # removed in ROCm 6.1
        procs = self.gpus[int(h[1:])][2]
        if process not in procs:
            raise RuntimeError("AMDSMI_STATUS_NOT_FOUND")  # the process ended between the two calls
        return self._info(process, procs[process])


def _smi_of(env, vram_by_gpu, **kw):
    """A stand-in listing the detected GPUs (by their PCI bus id and serial) with {pid: bytes} each."""
    return FakeAmdSmi([(d.pci, amd_smi.uuid_serial(d.uuid), vram) for d, vram in zip(env.usable_devices, vram_by_gpu)],
                      **kw)


@pytest.fixture
def smi_module(monkeypatch):
    """Install a stand-in as ``import amdsmi`` for this process, with amdsmi's state of the plugin reset."""
    monkeypatch.setattr(amd_smi, "_state", {})
    monkeypatch.setattr(amd_smi, "_handles", {})

    def install(smi):
        monkeypatch.setitem(sys.modules, "amdsmi", smi)
        return smi
    return install


def _mi250x(tmp_path):
    """An MI250X node of 8 GCDs of 64 GiB, two left visible (HIP_VISIBLE_DEVICES=0,1), as detection reads it."""
    amd_machine(tmp_path / "mi250x", 8, gfx_target_version=90010, vram=64 * GiB)
    return detect(root=str(tmp_path / "mi250x"), environ={"HIP_VISIBLE_DEVICES": "0,1"}, probe="never")


def _sent_gpus(env):
    """What a worker sends its controller of its GPUs at collection (``dist.worker.RouteSender``)."""
    from pytest_gpuenv.dist.worker import RouteSender

    sent = []
    session = SimpleNamespace(env=env, host="mi250x", settings=SimpleNamespace(default_claim=GiB, root=None))
    RouteSender(session, SimpleNamespace(send=sent.append)).pytest_collection_finish(SimpleNamespace(items=[]))
    return sent[0]["gpus"]


def test_other_processes_vram_on_each_gcd_is_taken_off_its_room(tmp_path, smi_module):
    """Another process holds 20 GiB on GCD 0 and 16 GiB on GCD 1; this process and its parent hold some too (not
    counted). The worker sends those figures; the scheduler skips a 50 GiB claim once, naming the largest room
    (48 GiB, 16 GiB held by other processes), runs the 40 GiB tests, and the summary names what others held."""
    env = _mi250x(tmp_path)
    me, parent = os.getpid(), os.getppid()
    smi_module(_smi_of(env, [{me: 3 * GiB, parent: GiB, OTHER: 20 * GiB}, {OTHER: 16 * GiB}]))
    gpus = _sent_gpus(env)
    assert [(g["id"], g["total"], g["others"]) for g in gpus] == [
        ("GPU-3cbe002bd3b6313d", 64 * GiB, 20 * GiB), ("GPU-3cbe002bd3b6313e", 64 * GiB, 16 * GiB)]
    claims = {0: Claim(1, 50 * GiB, declared=True), **{i: Claim(1, 40 * GiB, declared=True) for i in range(1, 7)}}
    peak, ran, skipped, sched, _ = _run({f"gw{w}": _rotated(gpus, w) for w in range(4)}, claims, 8)
    assert skipped == ["t.py::test_0"] and sorted(ran) == list(range(1, 8))
    reason = sched.ledger.no_room_reason(claims[0])
    assert reason.endswith("the largest has 48.0 GiB free of 64.0 GiB (16.0 GiB held by other processes)")
    assert all(p <= 44 * GiB for p in peak.values())  # one 40 GiB test per GCD at a time (+ 1 GiB tests)
    assert [ln.split(", waited")[0].split("of 64.0 GiB, ")[1] for ln in sched.ledger.summary_lines()] == [
        "20.0 GiB held by other processes", "16.0 GiB held by other processes"]


def test_rocm_6_0_process_handles_and_the_gpus_amdsmi_cannot_tell_of(tmp_path, smi_module, monkeypatch):
    """ROCm 6.0's process handles are read one by one (a process that ended meanwhile is left out; an amdsmi
    without the function to read them is no answer); a GPU whose process list fails, or that amdsmi does not list, counts 0, as where amdsmi is
    missing or fails to start."""
    env = _mi250x(tmp_path)
    smi = _smi_of(env, [{OTHER: 6 * GiB}, {OTHER + 1: GiB}], rocm60=True)
    keys = [(d.uuid, d.pci) for d in env.usable_devices]
    assert amd_smi.vram_held(keys, smi=smi) == [6 * GiB, GiB]
    gone = _smi_of(env, [{OTHER: 6 * GiB}, {}], rocm60=True)
    gone.amdsmi_get_gpu_process_list = lambda h: [OTHER, OTHER + 7]  # OTHER + 7 ended before its info was read
    assert amd_smi.vram_held(keys, smi=gone) == [6 * GiB, 0]
    assert amd_smi.vram_held(keys, smi=_smi_of(env, [{}, {}], fail={"amdsmi_get_gpu_process_list"})) == [None, None]
    # handles listed and no function to read them: amdsmi cannot tell (None), not an empty GPU (0)
    unread = _smi_of(env, [{OTHER: 6 * GiB}, {}], rocm60=True)
    unread.amdsmi_get_gpu_process_info = None
    assert amd_smi.vram_held(keys, smi=unread) == [None, 0]
    assert amd_smi.vram_held(keys, smi=FakeAmdSmi([("0000:99:00.0", 1, {OTHER: GiB})])) == [None, None]
    # by UUID where the device has no PCI bus id (amdsmi's UUID carries the serial ROCr's does)
    assert amd_smi.vram_held([(env.usable_devices[1].uuid, None)], smi=smi) == [GiB]

    smi_module(_smi_of(env, [{OTHER: 6 * GiB}, {}], fail={"amdsmi_init"}))
    assert [g["others"] for g in _sent_gpus(env)] == [0, 0]
    monkeypatch.setattr(amd_smi, "_state", {})
    smi_module(None)  # not installed: import amdsmi raises ModuleNotFoundError
    assert [g["others"] for g in _sent_gpus(env)] == [0, 0]


def test_two_partitions_sharing_one_pci_address_count_nothing(tmp_path):
    """Partitions of an MI300 whose kernel puts the partition in location_id bits 31:28 share one BDF: which one
    a device is cannot be told, so neither is counted (rather than another partition's processes)."""
    smi = FakeAmdSmi([("0000:0c:00.0", 1, {OTHER: GiB}), ("0000:0c:00.0", 2, {OTHER: 9 * GiB})])
    assert amd_smi.vram_held([("GPU-0000000000000001", "0000:0c:00.0")], smi=smi) == [None]


def _meter_item(pytester, roots, claim="40GiB"):
    env = detect(root=str(roots("mi300x_linux")), environ={"HIP_VISIBLE_DEVICES": "0"}, probe="never")
    item = pytester.getitem(f"import pytest\n@pytest.mark.requires_memory('{claim}')\ndef test_big(): pass\n",
                            "test_big")
    session = SimpleNamespace(env=env, host="h",
                              settings=SimpleNamespace(root=None, default_claim=GiB))
    return env, item, session


def test_a_test_whose_process_held_more_vram_than_it_claimed_is_reported(pytester, roots, smi_module, monkeypatch):
    """On an MI300X (its first GPU visible) where torch started no runtime, amdsmi's ``vram_mem`` for this process
    is its use: 50 GiB against a 40 GiB claim is a warning naming the GPU, and both figures go to the controller;
    another process's VRAM on the GPU is not this test's."""
    from pytest_gpuenv.dist.use import USE_PROPERTY, ClaimWarning, UseMeter

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    env, item, session = _meter_item(pytester, roots)
    smi_module(_smi_of(env, [{os.getpid(): 50 * GiB, OTHER: 9 * GiB}]))
    with pytest.warns(ClaimWarning, match=r"test_big used 50.0 GiB of GPU memory on GPU-3cbe002bd3b6313d but "
                                          r"claimed 40.0 GiB \(requires_memory\)"):
        UseMeter(session)._measure(item)
    assert item.user_properties == [(USE_PROPERTY, {"GPU-3cbe002bd3b6313d": [50 * GiB, 40 * GiB]})]


def test_without_amdsmi_a_test_gets_no_figure(pytester, roots, smi_module, monkeypatch):
    """amdsmi failing to start (no driver, no permission), or this process not in its list (another PID
    namespace): no figure and no warning."""
    import warnings

    from pytest_gpuenv.dist.use import UseMeter

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    env, item, session = _meter_item(pytester, roots, "1GiB")
    for smi in (_smi_of(env, [{os.getpid(): 50 * GiB}], fail={"amdsmi_init"}), _smi_of(env, [{OTHER: 50 * GiB}])):
        monkeypatch.setattr(amd_smi, "_state", {})
        monkeypatch.setattr(amd_smi, "_handles", {})
        smi_module(smi)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            UseMeter(session)._measure(item)
        assert item.user_properties == []
