# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""GPU facts from nvidia-smi: parsing and the node-level summary.

Three commands feed the facts (the module runs them; this file only parses):
  nvidia-smi -q -x                                         per-GPU details (XML)
  nvidia-smi --query-gpu=index,uuid,compute_cap --format=csv,noheader
                                                           compute capability (the XML has none)
  nvidia-smi topo -m                                       the GPU-to-GPU link matrix

Nothing here raises on bad or missing output: a node without usable GPUs gets facts with
``available: false`` and a ``reason`` code, so the preflight role can fail with a clear line.
The layout is documented in docs/facts.md.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable

SCHEMA = 1

NVIDIA_SMI = "nvidia-smi"
XML_ARGV = [NVIDIA_SMI, "-q", "-x"]
CAPS_ARGV = [NVIDIA_SMI, "--query-gpu=index,uuid,compute_cap", "--format=csv,noheader"]
TOPO_ARGV = [NVIDIA_SMI, "topo", "-m"]

# reason codes when available is false
NVIDIA_SMI_MISSING = "nvidia-smi-missing"
NVML_INIT_FAILED = "nvml-init-failed"
DRIVER_NOT_LOADED = "driver-not-loaded"
NO_GPUS = "no-gpus"
NVIDIA_SMI_FAILED = "nvidia-smi-failed"
PARSE_ERROR = "parse-error"

# Fallback when the driver is too old for --query-gpu=compute_cap: the product name.
# Ordered: the first pattern that matches the name wins.
_CAPABILITY_BY_NAME: list[tuple[str, str]] = [
    (r"\bGB10\b", "12.1"),
    (r"\bRTX PRO \d+ Blackwell|\bRTX 50\d0\b", "12.0"),
    (r"\bB300\b|\bGB300\b", "10.3"),
    (r"\bB200\b|\bB100\b|\bGB200\b", "10.0"),
    (r"\bH100\b|\bH200\b|\bH800\b|\bH20\b|\bGH200\b", "9.0"),
    (r"\bL40S?\b|\bL4\b|\bRTX 6000 Ada\b|\bRTX 40\d0\b", "8.9"),
    (r"\bA10G?\b|\bA40\b|\bRTX A6000\b|\bRTX 30\d0\b", "8.6"),
    (r"\bA100\b|\bA800\b|\bA30\b", "8.0"),
]

# SM families with native FP4 tensor cores (Blackwell datacenter and workstation parts).
FP4_NATIVE_MAJORS = (10, 12)

_NVLINK = re.compile(r"^NV(\d+)$")


class GpuFactsError(ValueError):
    """Output of nvidia-smi that cannot be understood."""


def sm_tag(capability: str | None) -> str | None:
    """'12.0' -> 'sm120', '9.0' -> 'sm90', '10.3' -> 'sm103'."""
    if not capability:
        return None
    m = re.fullmatch(r"(\d+)\.(\d+)", capability.strip())
    if not m:
        return None
    major, minor = int(m.group(1)), int(m.group(2))
    return f"sm{major}{minor}" if minor else f"sm{major}0"


def capability_from_name(name: str) -> str | None:
    for pattern, cap in _CAPABILITY_BY_NAME:
        if re.search(pattern, name):
            return cap
    return None


def classify_failure(rc: int, out: str, err: str) -> tuple[str, str]:
    """(reason code, one-line message) for a failed nvidia-smi call."""
    text = f"{out}\n{err}"
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), f"exit status {rc}")
    if "Failed to initialize NVML" in text:
        return NVML_INIT_FAILED, f"nvidia-smi: {first} (driver/library mismatch or no driver)"
    if "couldn't communicate with the NVIDIA driver" in text:
        return DRIVER_NOT_LOADED, f"nvidia-smi: {first}"
    if "No devices were found" in text:
        return NO_GPUS, "nvidia-smi: No devices were found"
    return NVIDIA_SMI_FAILED, f"nvidia-smi exited with status {rc}: {first}"


def _text(el: ET.Element | None, path: str) -> str | None:
    if el is None:
        return None
    found = el.find(path)
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    return None if value in ("", "N/A", "[N/A]", "Not Supported", "[Not Supported]") else value


def _number(value: str | None) -> float | None:
    """'143771 MiB' -> 143771.0, '700.00 W' -> 700.0, '16x' -> 16.0; None for N/A."""
    if value is None:
        return None
    m = re.match(r"^\s*(-?\d+(?:\.\d+)?)", value)
    return float(m.group(1)) if m else None


def _int(value: str | None) -> int | None:
    n = _number(value)
    return None if n is None else int(n)


def parse_compute_caps(text: str) -> dict[str, str]:
    """`--query-gpu=index,uuid,compute_cap` CSV -> {uuid: '9.0'} (index as key too)."""
    caps: dict[str, str] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3 or not re.fullmatch(r"\d+\.\d+", parts[2]):
            continue
        caps[parts[1]] = parts[2]
        caps[f"index:{parts[0]}"] = parts[2]
    return caps


def _power_limit(gpu: ET.Element) -> float | None:
    # Newer drivers: gpu_power_readings; older: power_readings with power_limit.
    for path in (
        "gpu_power_readings/current_power_limit",
        "power_readings/current_power_limit",
        "power_readings/power_limit",
        "gpu_power_readings/enforced_power_limit",
        "power_readings/enforced_power_limit",
    ):
        value = _number(_text(gpu, path))
        if value is not None:
            return value
    return None


def _gpu(gpu: ET.Element, position: int, caps: dict[str, str]) -> dict:
    name = _text(gpu, "product_name") or "unknown"
    uuid = _text(gpu, "uuid")
    index = _int(_text(gpu, "minor_number"))
    index = position if index is None else index
    cap = caps.get(uuid or "") or caps.get(f"index:{position}")
    cap_source = "nvidia-smi" if cap else None
    if cap is None:
        cap = capability_from_name(name)
        cap_source = "product-name" if cap else None
    processes = []
    for proc in gpu.findall("processes/process_info"):
        processes.append(
            {
                "pid": _int(_text(proc, "pid")),
                "type": _text(proc, "type"),
                "name": _text(proc, "process_name"),
                "used_memory_mib": _int(_text(proc, "used_memory")),
            }
        )
    link = "pci/pci_gpu_link_info"
    return {
        "index": index,
        "name": name,
        "uuid": uuid,
        "pci_bus_id": _text(gpu, "pci/pci_bus_id") or gpu.get("id"),
        "architecture": _text(gpu, "product_architecture"),
        "compute_capability": cap,
        "compute_capability_source": cap_source,
        "sm": sm_tag(cap),
        "memory_total_mib": _int(_text(gpu, "fb_memory_usage/total")),
        "memory_used_mib": _int(_text(gpu, "fb_memory_usage/used")),
        "memory_reserved_mib": _int(_text(gpu, "fb_memory_usage/reserved")),
        "power_limit_w": _power_limit(gpu),
        "pcie_gen_current": _int(_text(gpu, f"{link}/pcie_gen/current_link_gen")),
        "pcie_gen_max": _int(_text(gpu, f"{link}/pcie_gen/max_link_gen")),
        "pcie_width_current": _int(_text(gpu, f"{link}/link_widths/current_link_width")),
        "pcie_width_max": _int(_text(gpu, f"{link}/link_widths/max_link_width")),
        "mig_mode": _text(gpu, "mig_mode/current_mig"),
        "persistence_mode": _text(gpu, "persistence_mode"),
        "processes": processes,
    }


def parse_smi_xml(text: str, caps: dict[str, str] | None = None) -> dict:
    """`nvidia-smi -q -x` -> {driver_version, cuda_version, attached_gpus, gpus: [...]}."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise GpuFactsError(f"nvidia-smi -q -x output is not XML: {exc}") from exc
    if root.tag != "nvidia_smi_log":
        raise GpuFactsError(f"nvidia-smi -q -x: root element is <{root.tag}>, not <nvidia_smi_log>")
    gpus = [_gpu(g, i, caps or {}) for i, g in enumerate(root.findall("gpu"))]
    gpus.sort(key=lambda g: g["index"])
    return {
        "driver_version": _text(root, "driver_version"),
        "cuda_version": _text(root, "cuda_version"),
        "attached_gpus": _int(_text(root, "attached_gpus")),
        "gpus": gpus,
    }


def parse_topo_matrix(text: str) -> dict:
    """`nvidia-smi topo -m` -> {"gpus": ["GPU0", ...], "links": {"GPU0": {"GPU1": "NV18"}},
    "cpu_affinity": {...}, "numa_affinity": {...}}. Only GPU rows and columns are kept."""
    ansi = re.compile(r"\x1b\[[0-9;]*m")
    lines = [ansi.sub("", ln).rstrip() for ln in text.splitlines()]
    header_idx = next((i for i, ln in enumerate(lines) if re.match(r"^\s+GPU0\b", ln)), None)
    if header_idx is None:
        raise GpuFactsError("nvidia-smi topo -m: no header row starting with GPU0")
    header = [h.strip() for h in lines[header_idx].strip().split("\t") if h.strip()]
    if len(header) == 1:  # some builds pad with spaces instead of tabs
        header = re.split(r"\s{2,}|\t", lines[header_idx].strip())
    gpu_cols = [h for h in header if re.fullmatch(r"GPU\d+", h)]
    links: dict[str, dict[str, str]] = {}
    cpu_affinity: dict[str, str] = {}
    numa_affinity: dict[str, str] = {}
    for ln in lines[header_idx + 1 :]:
        if not ln.strip() or ln.startswith("Legend"):
            break
        cells = [c.strip() for c in ln.split("\t")]
        if len(cells) < 2:
            cells = ln.split()
        row = cells[0]
        if not re.fullmatch(r"GPU\d+", row):
            continue
        values = cells[1:]
        links[row] = {col: values[i] for i, col in enumerate(gpu_cols) if i < len(values)}
        rest = values[len(gpu_cols) :]
        for i, col in enumerate(header[len(gpu_cols) :]):
            if i < len(rest):
                if col == "CPU Affinity":
                    cpu_affinity[row] = rest[i]
                elif col == "NUMA Affinity":
                    numa_affinity[row] = rest[i]
    return {
        "gpus": gpu_cols,
        "links": links,
        "cpu_affinity": cpu_affinity,
        "numa_affinity": numa_affinity,
    }


def interconnect(topology: dict | None, count: int) -> dict:
    """Summarise GPU-to-GPU links: kind nvlink | partial-nvlink | pcie | none | unknown."""
    if count < 2:
        return {"kind": "none", "pcie_only": False, "nvlink_pairs": 0, "pairs": 0, "min_nvlinks": None}
    if not topology or not topology.get("links"):
        return {"kind": "unknown", "pcie_only": False, "nvlink_pairs": 0, "pairs": 0, "min_nvlinks": None}
    names = topology["gpus"]
    pairs = nv_pairs = 0
    nv_counts = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            link = topology["links"].get(a, {}).get(b, "")
            pairs += 1
            m = _NVLINK.match(link)
            if m:
                nv_pairs += 1
                nv_counts.append(int(m.group(1)))
    if nv_pairs == 0:
        kind = "pcie"
    elif nv_pairs == pairs:
        kind = "nvlink"
    else:
        kind = "partial-nvlink"
    return {
        "kind": kind,
        "pcie_only": nv_pairs == 0,
        "nvlink_pairs": nv_pairs,
        "pairs": pairs,
        "min_nvlinks": min(nv_counts) if nv_counts else None,
    }


def unavailable(reason: str, message: str, **extra: object) -> dict:
    facts = {
        "schema": SCHEMA,
        "available": False,
        "reason": reason,
        "message": message,
        "driver_version": None,
        "cuda_version": None,
        "count": 0,
        "gpus": [],
        "sm": None,
        "sms": [],
        "compute_capability": None,
        "fp4_native": False,
        "interconnect": "none",
        "pcie_only": False,
        "nvlink_pairs": 0,
        "min_nvlinks": None,
        "topology": None,
        "warnings": [],
    }
    facts.update(extra)
    return facts


def build_facts(xml_text: str, caps_text: str | None = None, topo_text: str | None = None) -> dict:
    """All three outputs -> the bwtune_gpu facts dict (see docs/facts.md)."""
    warnings: list[str] = []
    try:
        parsed = parse_smi_xml(xml_text, parse_compute_caps(caps_text or ""))
    except GpuFactsError as exc:
        return unavailable(PARSE_ERROR, str(exc))
    gpus = parsed["gpus"]
    if not gpus:
        return unavailable(
            NO_GPUS,
            "nvidia-smi lists no GPUs (attached_gpus is "
            f"{parsed['attached_gpus'] if parsed['attached_gpus'] is not None else 'missing'})",
            driver_version=parsed["driver_version"],
            cuda_version=parsed["cuda_version"],
        )
    topology = None
    if topo_text is not None:
        try:
            topology = parse_topo_matrix(topo_text)
        except GpuFactsError as exc:
            warnings.append(str(exc))
    elif len(gpus) > 1:
        warnings.append("nvidia-smi topo -m gave no output: GPU interconnect unknown")
    for g in gpus:
        if g["compute_capability_source"] == "product-name":
            warnings.append(f"GPU {g['index']}: compute capability guessed from its name {g['name']!r}")
        elif g["compute_capability"] is None:
            warnings.append(f"GPU {g['index']}: compute capability unknown for {g['name']!r}")
    sms = sorted({g["sm"] for g in gpus if g["sm"]})
    caps = sorted({g["compute_capability"] for g in gpus if g["compute_capability"]})
    if len(sms) == 1 and all(g["sm"] for g in gpus):
        sm: str | None = sms[0]
    elif len(sms) > 1:
        sm = "mixed"
    else:
        sm = None
    link = interconnect(topology, len(gpus))
    return {
        "schema": SCHEMA,
        "available": True,
        "reason": None,
        "message": f"{len(gpus)} x {gpus[0]['name']}"
        if len({g["name"] for g in gpus}) == 1
        else f"{len(gpus)} GPUs: " + ", ".join(sorted({g["name"] for g in gpus})),
        "driver_version": parsed["driver_version"],
        "cuda_version": parsed["cuda_version"],
        "count": len(gpus),
        "gpus": gpus,
        "sm": sm,
        "sms": sms,
        "compute_capability": caps[0] if len(caps) == 1 and sm not in (None, "mixed") else None,
        "fp4_native": bool(gpus)
        and all(
            g["compute_capability"] and int(g["compute_capability"].split(".")[0]) in FP4_NATIVE_MAJORS
            for g in gpus
        ),
        "interconnect": link["kind"],
        "pcie_only": link["pcie_only"],
        "nvlink_pairs": link["nvlink_pairs"],
        "min_nvlinks": link["min_nvlinks"],
        "topology": topology,
        "warnings": warnings,
    }


# run(argv) -> (rc, stdout, stderr); the module passes module.run_command.
Runner = Callable[[list[str]], tuple[int, str, str]]


def gather(run: Runner, nvidia_smi: str | None, wanted: str = NVIDIA_SMI) -> dict:
    """Run the three nvidia-smi commands through `run` and build the facts.

    `nvidia_smi` is the resolved path of nvidia-smi, or None when it is not installed.
    """
    if not nvidia_smi:
        return unavailable(
            NVIDIA_SMI_MISSING,
            f"{wanted} not found (looked on PATH): no NVIDIA driver installed on this node",
        )
    rc, out, err = run([nvidia_smi, *XML_ARGV[1:]])
    if rc != 0 or not out.strip():
        reason, message = classify_failure(rc, out, err)
        return unavailable(reason, message)
    crc, cout, _cerr = run([nvidia_smi, *CAPS_ARGV[1:]])
    trc, tout, _terr = run([nvidia_smi, *TOPO_ARGV[1:]])
    return build_facts(out, cout if crc == 0 else None, tout if trc == 0 else None)


def node_sm(facts: dict) -> str:
    """The one SM tag of a node ('sm120'), for `hardware.gpu: auto` in the planner.

    Raises ValueError with one line saying why when the facts cannot give one (no GPUs,
    mixed GPU generations, unknown capability).
    """
    if not facts.get("available"):
        raise ValueError(
            f"gpu: auto needs GPU facts, but the node has none usable: "
            f"{facts.get('message') or facts.get('reason')}"
        )
    sm = facts.get("sm")
    if sm == "mixed":
        raise ValueError(f"gpu: auto found mixed GPU generations on one node: {', '.join(facts['sms'])}")
    if not sm:
        raise ValueError("gpu: auto could not tell the compute capability of this node's GPUs")
    return str(sm)
