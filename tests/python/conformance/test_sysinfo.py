"""Conformance: kernelfoundry.utils.sysinfo's GPU discovery as the reference's tests/test_intel_gpu_discovery.py
states it (Windows PnP parsing, platform dispatch, discrete-first selection, device names), plus the Linux sysfs
path on a fake DRM tree and the probes on this machine (no GPU: empty results, never an exception)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kernelfoundry.utils import sysinfo

UHD_770 = r"PCI\VEN_8086&DEV_A780&SUBSYS_7E061462&REV_04\3&11583659&0&10"
NVIDIA = r"PCI\VEN_10DE&DEV_2786&SUBSYS_88EE1043&REV_A1\4&18DC2E69&0&0008"


def fake_run(stdout: str, returncode: int = 0):
    def run(*args, **kwargs):
        return subprocess.CompletedProcess(args=args, returncode=returncode, stdout=stdout, stderr="")
    return run


class TestWindowsDiscovery:
    def test_an_intel_gpu_is_found_in_the_sysfs_form(self, monkeypatch):
        monkeypatch.setattr(subprocess, "run", fake_run(UHD_770 + "\n"))
        [(path, device_id, pci)] = sysinfo._discover_intel_gpus_windows()
        assert device_id == "0xa780" and pci == UHD_770 and path == Path(UHD_770)

    def test_other_vendors_and_ignored_devices_are_dropped(self, monkeypatch):
        monkeypatch.setattr(subprocess, "run", fake_run(NVIDIA + "\n"))
        assert sysinfo._discover_intel_gpus_windows() == []
        monkeypatch.setattr(subprocess, "run", fake_run(r"PCI\VEN_8086&DEV_4680&SUBSYS_0&REV_0C\3&1&0&10" + "\n"))
        assert sysinfo._discover_intel_gpus_windows() == [] and "0x4680" in sysinfo.IGNORED_INTEL_DEVICE_IDS

    def test_every_adapter_in_order(self, monkeypatch):
        second = r"PCI\VEN_8086&DEV_56C0&SUBSYS_00000000&REV_08\3&11583659&0&11"
        monkeypatch.setattr(subprocess, "run", fake_run(f"{UHD_770}\n{second}\n"))
        assert [g[1] for g in sysinfo._discover_intel_gpus_windows()] == ["0xa780", "0x56c0"]

    def test_failures_are_empty(self, monkeypatch):
        monkeypatch.setattr(subprocess, "run", fake_run("", returncode=1))
        assert sysinfo._discover_intel_gpus_windows() == []

        def missing(*args, **kwargs):
            raise FileNotFoundError("powershell")
        monkeypatch.setattr(subprocess, "run", missing)
        assert sysinfo._discover_intel_gpus_windows() == []


def test_dispatch_by_platform(monkeypatch):
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setattr(sysinfo, "_discover_intel_gpus_windows", lambda: [(Path("w"), "0xdead", "w")])
    monkeypatch.setattr(sysinfo, "_discover_intel_gpus_sysfs", lambda: pytest.fail("sysfs used on Windows"))
    assert sysinfo.discover_intel_gpus() == [(Path("w"), "0xdead", "w")]
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(sysinfo, "_discover_intel_gpus_sysfs", lambda: [(Path("l"), "0xbeef", "l")])
    monkeypatch.setattr(sysinfo, "_discover_intel_gpus_windows", lambda: pytest.fail("PnP used on Linux"))
    assert sysinfo.discover_intel_gpus() == [(Path("l"), "0xbeef", "l")]


class TestSelection:
    B580 = (Path("b"), "0xe20b", "b")
    UHD = (Path("i"), "0xa780", "i")

    def test_discrete_wins_over_the_igpu_listed_first(self, monkeypatch):
        monkeypatch.setattr(sysinfo, "discover_intel_gpus", lambda: [self.UHD, self.B580])
        assert sysinfo.select_intel_gpu() == self.B580

    def test_the_igpu_when_it_is_all_there_is(self, monkeypatch):
        monkeypatch.setattr(sysinfo, "discover_intel_gpus", lambda: [self.UHD])
        assert sysinfo.select_intel_gpu() == self.UHD

    def test_unknown_cards_keep_discovery_order(self, monkeypatch):
        unknown = (Path("u"), "0x1234", "u")
        monkeypatch.setattr(sysinfo, "discover_intel_gpus", lambda: [unknown, self.B580])
        assert sysinfo.select_intel_gpu() == unknown

    def test_none_without_an_intel_gpu(self, monkeypatch):
        monkeypatch.setattr(sysinfo, "discover_intel_gpus", lambda: [])
        assert sysinfo.select_intel_gpu() is None


class TestDeviceName:
    LISTING = f"{UHD_770}|Intel(R) UHD Graphics 770\n" + r"PCI\VEN_8086&DEV_E20B&X|Intel(R) Arc(TM) B580 Graphics"

    def test_found_unknown_and_failed(self, monkeypatch):
        monkeypatch.setattr(subprocess, "run", fake_run(self.LISTING))
        assert sysinfo._get_device_name_windows(UHD_770) == "Intel(R) UHD Graphics 770"
        assert sysinfo._get_device_name_windows(NVIDIA) == ""
        monkeypatch.setattr(subprocess, "run", fake_run("", returncode=1))
        assert sysinfo._get_device_name_windows(UHD_770) == ""

    def test_windows_does_not_reach_for_lspci(self, monkeypatch):
        monkeypatch.setattr(sys, "platform", "win32")
        monkeypatch.setattr(sysinfo, "_get_device_name_windows", lambda pnp: "Intel(R) Arc(TM) B580 Graphics")
        monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("lspci used on Windows"))
        assert sysinfo.get_device_name_by_pci_address("anything") == "Intel(R) Arc(TM) B580 Graphics"


def test_sysfs_discovery_on_a_fake_drm_tree(tmp_path):
    def card(i, driver, device_id, slot, vram=None):
        dev = tmp_path / f"card{i}" / "device"
        dev.mkdir(parents=True)
        (dev / "uevent").write_text(f"DRIVER={driver}\nPCI_CLASS=30000\nPCI_SLOT_NAME={slot}\n")
        (dev / "device").write_text(device_id + "\n")
        if vram is not None:
            (dev / "mem_info_vram_total").write_text(str(vram))
    card(0, "i915", "0xA780", "0000:00:02.0")
    card(1, "nvidia", "0x2786", "0000:01:00.0")
    card(2, "xe", "0xe20b", "0000:03:00.0", vram=12 << 30)
    card(3, "i915", "0x4680", "0000:00:02.1")  # ignored AlderLake iGPU
    found = sysinfo._discover_intel_gpus_sysfs(tmp_path)
    assert [(p.name, d, s) for p, d, s in found] == [("card0", "0xa780", "0000:00:02.0"),
                                                   ("card2", "0xe20b", "0000:03:00.0")]
    assert sysinfo._is_integrated_intel_gpu(*found[0]) and not sysinfo._is_integrated_intel_gpu(*found[1])


def test_probes_on_this_machine_never_raise():
    assert isinstance(sysinfo.discover_intel_gpus(), list)
    assert isinstance(sysinfo.get_nvidia_compute_capabilities(), list)
    for probe in (sysinfo.get_intel_cpu_name, sysinfo.get_nvcc_version, sysinfo.get_icpx_version,
                  sysinfo.get_ocl_driver_version, sysinfo.get_nvidia_gpu_name, sysinfo.get_torch_version):
        assert isinstance(probe(), str)
    assert sysinfo.get_total_system_memory_kb() > 0 and sysinfo.get_torch_version().startswith("1.")
    info = sysinfo.get_worker_info()
    assert info is sysinfo.get_worker_info() and {"device_id", "gpu_name", "torch_version", "hostname",
                                                  "nvidia_compute_capabilities"} <= set(info)


class TestReferencePaths:
    """The reference ships sysinfo and the benchdnn helpers under ``kernelfoundry.eval_pipeline.utils`` too
    (``eval_pipeline/utils/sysinfo.py``, ``benchdnn_helper.py``); code importing either path gets our module."""

    def test_eval_pipeline_sysinfo_is_the_same_module(self, monkeypatch):
        from kernelfoundry.eval_pipeline.utils import sysinfo as ep_sysinfo
        assert ep_sysinfo is sysinfo
        monkeypatch.setattr(subprocess, "run", fake_run("8.9\n9.0\n8.9\n"))
        assert sorted(ep_sysinfo.get_nvidia_compute_capabilities()) == ["8.9", "9.0"]

    def test_benchdnn_helper_parses_as_the_reference_documents(self):
        from kernelfoundry.eval_pipeline.utils import benchdnn_helper
        import kernelfoundry.benchdnn
        assert benchdnn_helper is kernelfoundry.benchdnn
        assert benchdnn_helper.parse_benchdnn_correctness_check("0:PASSED (1 ms) __REPRO: --matmul 2x2:2x2") is True
        assert benchdnn_helper.parse_benchdnn_correctness_check("3:FAILED __REPRO: --matmul 2x2:2x2") is False
        with pytest.raises(ValueError):
            benchdnn_helper.parse_benchdnn_correctness_check("no repro line")
        stats = benchdnn_helper.parse_benchdnn_perf_stats("perf,engine,avg_time\nperf,cpu,0.125\n")
        assert stats == {"avg_time": 0.125}
        with pytest.raises(ValueError):
            benchdnn_helper.parse_benchdnn_perf_stats("perf,engine,avg_time\nperf,cpu,fast\n")
