"""System information (the reference's ``kernelfoundry.utils.sysinfo``; its newer copy lived in
``eval_pipeline/utils/sysinfo.py``): Intel GPU discovery (Linux DRM sysfs, the Windows PnP database),
NVIDIA compute capabilities, tool and driver versions, and the worker-info map. Every probe is best effort: a
missing tool or file gives an empty result ("" / [] / None), never an exception. External commands are run
through ``subprocess.run`` looked up at call time (tests replace it).
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Optional

__all__ = ["discover_intel_gpus", "select_intel_gpu", "get_nvidia_compute_capabilities", "get_nvidia_gpu_name",
           "get_device_name_by_pci_address", "get_intel_cpu_name", "get_total_system_memory_kb",
           "get_torch_version", "get_nvcc_version", "get_icpx_version", "get_ocl_driver_version",
           "get_neo_revision", "get_igc_revision", "get_git_commit_hash", "get_worker_info",
           "IGNORED_INTEL_DEVICE_IDS", "INTEGRATED_INTEL_DEVICE_IDS"]

#: Intel PCI device ids that are no useful compute target (AlderLake's iGPU).
IGNORED_INTEL_DEVICE_IDS = frozenset({"0x4680"})
#: Intel PCI device ids known to be integrated GPUs (the last resort of the integrated/discrete decision).
INTEGRATED_INTEL_DEVICE_IDS = frozenset({"0xa780"})  # RaptorLake UHD 770

_INTEL_PNP = re.compile(r"VEN_8086&DEV_([0-9A-Fa-f]{4})")
_DRM = Path("/sys/class/drm")


def _run(cmd: list, timeout: float = 30) -> Optional[subprocess.CompletedProcess]:
    """``cmd``'s completed process (text), or None when it cannot run or times out."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", errors="replace",
                              timeout=timeout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def _first_line(cmd: list) -> str:
    r = _run(cmd)
    if r is None or r.returncode != 0 or not r.stdout.strip():
        return ""
    return r.stdout.splitlines()[0].strip()


def get_intel_cpu_name() -> str:
    """The CPU's "model name" from /proc/cpuinfo ("" when unavailable)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="ignore") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if sep and key.strip().lower() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return ""


def get_total_system_memory_kb() -> int:
    """MemTotal of /proc/meminfo in kB (0 when unavailable)."""
    try:
        with open("/proc/meminfo", encoding="utf-8", errors="ignore") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split(":", 1)[1].split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def get_torch_version() -> str:
    """The installed torch's version, read without importing torch ("" when torch is not installed)."""
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415
    try:
        return version("torch")
    except PackageNotFoundError:
        try:  # Debian's python3-torch ships no distribution metadata: ask the module itself
            import torch  # noqa: PLC0415
            return str(torch.__version__)
        except ImportError:
            return ""


def get_nvcc_version() -> str:
    """CUDA's nvcc version ("12.2.140"), "" without nvcc."""
    r = _run(["nvcc", "--version"])
    if r is None or r.returncode != 0:
        return ""
    match = re.search(r"V(\d+\.\d+\.\d+)", r.stdout)
    return match.group(1) if match else ""


def get_icpx_version() -> str:
    """Intel icpx's version ("2025.0.4.20241205"), "" without icpx."""
    match = re.search(r"\b\d+\.\d+\.\d+\.\d+\b", _first_line(["icpx", "--version"]))
    return match.group(0) if match else ""


def get_ocl_driver_version() -> str:
    """``ocloc query OCL_DRIVER_VERSION`` ("" without ocloc)."""
    return _first_line(["ocloc", "query", "OCL_DRIVER_VERSION"])


def get_neo_revision() -> str:
    """``ocloc query NEO_REVISION`` ("" without ocloc)."""
    return _first_line(["ocloc", "query", "NEO_REVISION"])


def get_igc_revision() -> str:
    """``ocloc query IGC_REVISION`` ("" without ocloc)."""
    return _first_line(["ocloc", "query", "IGC_REVISION"])


def get_git_commit_hash() -> str:
    """``git describe --always --dirty`` of the current directory ("" outside a repository)."""
    return _first_line(["git", "describe", "--always", "--dirty"])


def _discover_intel_gpus_sysfs(drm: Path = _DRM) -> list[tuple[Path, str, str]]:
    """Intel GPUs (driver xe or i915) among /sys/class/drm/card0..7: (card path, device id "0x56c0", PCI slot)."""
    found = []
    for i in range(8):
        card = drm / f"card{i}"
        uevent = card / "device" / "uevent"
        try:
            info = uevent.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if "DRIVER=xe" not in info and "DRIVER=i915" not in info:
            continue
        slot = next((line.split("=", 1)[1].strip() for line in info.splitlines()
                     if line.startswith("PCI_SLOT_NAME=")), "")
        try:
            device_id = (card / "device" / "device").read_text(encoding="utf-8", errors="replace").strip().lower()
        except OSError:
            continue
        if device_id not in IGNORED_INTEL_DEVICE_IDS:
            found.append((card, device_id, slot))
    return found


def _discover_intel_gpus_windows() -> list[tuple[Path, str, str]]:
    """Intel GPUs from the Windows PnP database (PNPDeviceID ``PCI\\VEN_8086&DEV_A780&…`` -> "0xa780"); the PnP id
    stands in for the card path and the PCI address. [] when PowerShell fails or is missing."""
    script = ("Get-CimInstance Win32_VideoController | Where-Object { $_.PNPDeviceID -like 'PCI\\VEN_8086*' } | "
              "ForEach-Object { $_.PNPDeviceID }")
    r = _run(["powershell", "-NoProfile", "-NonInteractive", "-Command", script])
    if r is None or r.returncode != 0:
        return []
    found = []
    for line in r.stdout.splitlines():
        pnp = line.strip()
        match = _INTEL_PNP.search(pnp)
        if not match:
            continue
        device_id = f"0x{match.group(1).lower()}"
        if device_id not in IGNORED_INTEL_DEVICE_IDS:
            found.append((Path(pnp), device_id, pnp))
    return found


def discover_intel_gpus() -> list[tuple[Path, str, str]]:
    """This machine's Intel GPUs as (card path, device id, PCI slot name); the device id ("0x56c0") is what
    TORCH_XPU_ARCH_LIST / ``ocloc -device`` accept. Linux: DRM sysfs; Windows: the PnP database."""
    if sys.platform == "win32":
        return _discover_intel_gpus_windows()
    return _discover_intel_gpus_sysfs()


def _is_integrated_intel_gpu(card_path: Path, device_id: str, pci_addr: str) -> bool:
    """Best-effort: no local VRAM (mem_info_vram_total 0) or a root-bus address (0000:00:…) means integrated;
    else the list of known integrated ids decides."""
    if pci_addr and ":" in pci_addr:
        try:
            return int((card_path / "device" / "mem_info_vram_total").read_text().strip()) == 0
        except (OSError, ValueError):
            pass
        if pci_addr.startswith("0000:00:"):
            return True
    return device_id.lower() in INTEGRATED_INTEL_DEVICE_IDS


def select_intel_gpu() -> Optional[tuple[Path, str, str]]:
    """The Intel GPU to build for: the first discrete one, else the first one; None without an Intel GPU."""
    gpus = discover_intel_gpus()
    if not gpus:
        return None
    discrete = [gpu for gpu in gpus if not _is_integrated_intel_gpu(*gpu)]
    return (discrete or gpus)[0]


def _get_device_name_windows(pnp_device_id: str) -> str:
    """The adapter name of a PnP device id from the PnP database ("" when not found or the query fails)."""
    script = "Get-CimInstance Win32_VideoController | ForEach-Object { $_.PNPDeviceID + '|' + $_.Name }"
    r = _run(["powershell", "-NoProfile", "-NonInteractive", "-Command", script])
    if r is None or r.returncode != 0:
        return ""
    wanted = pnp_device_id.strip().casefold()
    for line in r.stdout.splitlines():
        pnp, sep, name = line.partition("|")
        if sep and pnp.strip().casefold() == wanted:
            return name.strip()
    return ""


def get_device_name_by_pci_address(pci_address: str) -> str:
    """The device name at a PCI address ("0000:03:00.0") from ``lspci -s`` (Windows: the PnP database, the
    "address" being a PnP id); "" when unknown."""
    if sys.platform == "win32":
        return _get_device_name_windows(pci_address)
    line = _first_line(["lspci", "-s", pci_address])
    return line.split(":", 2)[-1].strip() if line else ""


def get_nvidia_compute_capabilities() -> list[str]:
    """The distinct compute capabilities of this machine's NVIDIA GPUs (["8.6"]) from nvidia-smi; [] without."""
    r = _run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"])
    if r is None or r.returncode != 0:
        return []
    caps: list[str] = []
    for line in r.stdout.splitlines():
        if line.strip() and line.strip() not in caps:
            caps.append(line.strip())
    return caps


def get_nvidia_gpu_name() -> str:
    """The first NVIDIA GPU's name from nvidia-smi ("" without one)."""
    return _first_line(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"])


def get_worker_info() -> dict:
    """This machine's description (computed once): nvcc/icpx/OpenCL/NEO/IGC versions, CPU, memory, Intel device
    id, GPU name, NVIDIA compute capabilities, git commit, torch version and host name."""
    if get_worker_info.info is None:
        gpu_name = get_nvidia_gpu_name()
        device_id = ""
        intel = select_intel_gpu()
        if intel is not None:
            device_id = intel[1]
            gpu_name = get_device_name_by_pci_address(intel[2]) or gpu_name
        get_worker_info.info = {
            "nvcc_version": get_nvcc_version(), "icpx_version": get_icpx_version(),
            "ocl_driver_version": get_ocl_driver_version(), "neo_revision": get_neo_revision(),
            "igc_revision": get_igc_revision(), "cpu_info": get_intel_cpu_name(),
            "total_system_memory_kb": get_total_system_memory_kb(), "device_id": device_id, "gpu_name": gpu_name,
            "nvidia_compute_capabilities": " ".join(get_nvidia_compute_capabilities()),
            "git_commit_hash": get_git_commit_hash(), "torch_version": get_torch_version(),
            "hostname": socket.gethostname(),
        }
    return get_worker_info.info


get_worker_info.info = None
