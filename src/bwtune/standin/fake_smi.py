"""A fake `nvidia-smi` for tests: the profile's GPUs, with the memory that running
stand-ins hold (gpu_state). Run through `bin/nvidia-smi`, which a test puts first on PATH.

Supported, in the real tool's output formats:
  nvidia-smi -q -x                                   XML (nvidia_smi_log)
  nvidia-smi --query-gpu=F1,F2 --format=csv[,noheader][,nounits] [-i 0,1]
  nvidia-smi --query-compute-apps=F1,F2 --format=csv[,noheader][,nounits]
  nvidia-smi -L
  nvidia-smi                                         a short summary table
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from xml.sax.saxutils import escape

from bwtune.standin.gpu_state import Holder, holders
from bwtune.standin.profile import Profile, ProfileError, load_profile

RESERVED_MIB = 512  # the driver keeps some memory for itself; real boards report it too
PROCESS_NAME = "bwtune-standin"


@dataclass(frozen=True)
class GpuView:
    index: int
    profile: Profile
    used_mib: int
    processes: list[tuple[int, int]]  # (pid, used MiB)

    @property
    def uuid(self) -> str:
        return "GPU-" + str(
            uuid.uuid5(uuid.NAMESPACE_URL, f"bwtune-standin/{self.profile.name}/{self.index}")
        )

    @property
    def bus_id(self) -> str:
        return f"00000000:{0x18 + self.index * 0x10:02X}:00.0"

    @property
    def total_mib(self) -> int:
        return self.profile.gpu.memory_mib

    @property
    def free_mib(self) -> int:
        return max(0, self.total_mib - RESERVED_MIB - self.used_mib)


def gpu_views(profile: Profile, held: list[Holder]) -> list[GpuView]:
    views = []
    for i in range(profile.gpu.count):
        procs = [(h.pid, h.used_mib) for h in held if i in h.gpus]
        views.append(GpuView(i, profile, sum(m for _, m in procs), procs))
    return views


# field name -> (header unit or "", value with units, value without units)
def _gpu_fields(g: GpuView) -> dict[str, tuple[str, Callable[[], str], Callable[[], str]]]:
    spec = g.profile.gpu
    util = "100" if g.processes else "0"

    def mib(v: int) -> tuple[str, Callable[[], str], Callable[[], str]]:
        return ("MiB", lambda: f"{v} MiB", lambda: str(v))

    def plain(v: object) -> tuple[str, Callable[[], str], Callable[[], str]]:
        return ("", lambda: str(v), lambda: str(v))

    return {
        "index": plain(g.index),
        "name": plain(spec.name),
        "gpu_name": plain(spec.name),
        "uuid": plain(g.uuid),
        "gpu_uuid": plain(g.uuid),
        "pci.bus_id": plain(g.bus_id),
        "gpu_bus_id": plain(g.bus_id),
        "serial": plain(f"{1650000000000 + g.index}"),
        "compute_cap": plain(spec.compute_capability),
        "driver_version": plain(spec.driver_version),
        "count": plain(spec.count),
        "memory.total": mib(g.total_mib),
        "memory.reserved": mib(RESERVED_MIB),
        "memory.used": mib(g.used_mib),
        "memory.free": mib(g.free_mib),
        "utilization.gpu": ("%", lambda: f"{util} %", lambda: util),
        "utilization.memory": ("%", lambda: "0 %", lambda: "0"),
        "temperature.gpu": plain(34 + (8 if g.processes else 0)),
        "power.limit": ("W", lambda: f"{spec.power_limit_w:.2f} W", lambda: f"{spec.power_limit_w:.2f}"),
        "power.draw": ("W", lambda: "45.00 W", lambda: "45.00"),
        "persistence_mode": plain("Enabled"),
        "pstate": plain("P0" if g.processes else "P8"),
        "mig.mode.current": plain("[N/A]"),
        "vbios_version": plain("98.02.2E.00.01"),
    }


class UsageError(Exception):
    pass


def _csv(headers: list[str], rows: list[list[str]], noheader: bool) -> str:
    lines = [] if noheader else [", ".join(headers)]
    lines += [", ".join(r) for r in rows]
    return "".join(line + "\n" for line in lines)


def _parse_format(value: str | None) -> tuple[bool, bool]:
    parts = (value or "").split(",")
    if not value or parts[0] != "csv" or any(p not in ("csv", "noheader", "nounits") for p in parts):
        raise UsageError(f'"{value}" is not a valid format. Valid formats: csv[,noheader][,nounits]')
    return "noheader" in parts, "nounits" in parts


def query_gpu(views: list[GpuView], fields: list[str], fmt: str | None) -> str:
    noheader, nounits = _parse_format(fmt)
    rows, headers = [], []
    for g in views:
        table = _gpu_fields(g)
        row = []
        for f in fields:
            if f not in table:
                raise UsageError(f'Field "{f}" is not a valid field to query.')
            unit, with_units, without = table[f]
            row.append(without() if nounits else with_units())
        rows.append(row)
    for f in fields:
        unit = _gpu_fields(views[0])[f][0] if views else ""
        headers.append(f"{f} [{unit}]" if unit and not nounits else f)
    return _csv(headers, rows, noheader)


def query_apps(views: list[GpuView], fields: list[str], fmt: str | None) -> str:
    noheader, nounits = _parse_format(fmt)
    rows = []
    allowed = {
        "pid",
        "process_name",
        "used_memory",
        "used_gpu_memory",
        "gpu_uuid",
        "gpu_bus_id",
        "gpu_name",
        "gpu_serial",
    }
    for f in fields:
        if f not in allowed:
            raise UsageError(f'Field "{f}" is not a valid field to query.')
    for g in views:
        gpu_table = _gpu_fields(g)
        for pid, used in g.processes:
            row = []
            for f in fields:
                if f == "pid":
                    row.append(str(pid))
                elif f == "process_name":
                    row.append(PROCESS_NAME)
                elif f in ("used_memory", "used_gpu_memory"):
                    row.append(str(used) if nounits else f"{used} MiB")
                else:
                    row.append(gpu_table["serial" if f == "gpu_serial" else f][1]())
            rows.append(row)
    headers = [f"{f} [MiB]" if f in ("used_memory", "used_gpu_memory") and not nounits else f for f in fields]
    return _csv(headers, rows, noheader)


def xml_report(views: list[GpuView], profile: Profile) -> str:
    spec = profile.gpu
    out = [
        '<?xml version="1.0" ?>',
        '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">',
        "<nvidia_smi_log>",
        f"\t<timestamp>{time.strftime('%a %b %d %H:%M:%S %Y')}</timestamp>",
        f"\t<driver_version>{escape(spec.driver_version)}</driver_version>",
        f"\t<cuda_version>{escape(spec.cuda_version)}</cuda_version>",
        f"\t<attached_gpus>{spec.count}</attached_gpus>",
    ]
    for g in views:
        procs = "".join(
            "\t\t\t<process_info>\n\t\t\t\t<gpu_instance_id>N/A</gpu_instance_id>\n"
            "\t\t\t\t<compute_instance_id>N/A</compute_instance_id>\n"
            f"\t\t\t\t<pid>{pid}</pid>\n\t\t\t\t<type>C</type>\n"
            f"\t\t\t\t<process_name>{PROCESS_NAME}</process_name>\n"
            f"\t\t\t\t<used_memory>{used} MiB</used_memory>\n\t\t\t</process_info>\n"
            for pid, used in g.processes
        )
        out += [
            f'\t<gpu id="{g.bus_id}">',
            f"\t\t<product_name>{escape(spec.name)}</product_name>",
            "\t\t<product_brand>NVIDIA RTX</product_brand>"
            if "RTX" in spec.name
            else "\t\t<product_brand>NVIDIA</product_brand>",
            "\t\t<product_architecture>Blackwell</product_architecture>",
            "\t\t<persistence_mode>Enabled</persistence_mode>",
            f"\t\t<serial>{1650000000000 + g.index}</serial>",
            f"\t\t<uuid>{g.uuid}</uuid>",
            f"\t\t<minor_number>{g.index}</minor_number>",
            "\t\t<compute_mode>Default</compute_mode>",
            f"\t\t<compute_cap>{escape(spec.compute_capability)}</compute_cap>",
            f"\t\t<pci>\n\t\t\t<pci_bus_id>{g.bus_id}</pci_bus_id>\n\t\t</pci>",
            "\t\t<fb_memory_usage>",
            f"\t\t\t<total>{g.total_mib} MiB</total>",
            f"\t\t\t<reserved>{RESERVED_MIB} MiB</reserved>",
            f"\t\t\t<used>{g.used_mib} MiB</used>",
            f"\t\t\t<free>{g.free_mib} MiB</free>",
            "\t\t</fb_memory_usage>",
            "\t\t<utilization>",
            f"\t\t\t<gpu_util>{100 if g.processes else 0} %</gpu_util>",
            "\t\t\t<memory_util>0 %</memory_util>",
            "\t\t</utilization>",
            "\t\t<temperature>",
            f"\t\t\t<gpu_temp>{34 + (8 if g.processes else 0)} C</gpu_temp>",
            "\t\t</temperature>",
            "\t\t<gpu_power_readings>",
            "\t\t\t<power_draw>45.00 W</power_draw>",
            f"\t\t\t<current_power_limit>{spec.power_limit_w:.2f} W</current_power_limit>",
            "\t\t</gpu_power_readings>",
            "\t\t<processes>\n" + procs + "\t\t</processes>"
            if procs
            else "\t\t<processes>\n\t\t</processes>",
            "\t</gpu>",
        ]
    out.append("</nvidia_smi_log>")
    return "\n".join(out) + "\n"


def list_gpus(views: list[GpuView]) -> str:
    return "".join(f"GPU {g.index}: {g.profile.gpu.name} (UUID: {g.uuid})\n" for g in views)


def summary(views: list[GpuView], profile: Profile) -> str:
    lines = [
        time.strftime("%a %b %d %H:%M:%S %Y"),
        f"| NVIDIA-SMI {profile.gpu.driver_version}   Driver Version: {profile.gpu.driver_version}"
        f"   CUDA Version: {profile.gpu.cuda_version} |  (bwtune stand-in: simulated GPUs)",
    ]
    for g in views:
        lines.append(f"| {g.index}  {profile.gpu.name}  |  {g.used_mib}MiB / {g.total_mib}MiB |")
    lines.append("| Processes:")
    for g in views:
        for pid, used in g.processes:
            lines.append(f"|  {g.index}  {pid}  C  {PROCESS_NAME}  {used}MiB |")
    return "\n".join(lines) + "\n"


def _option(argv: list[str], name: str, short: str | None = None) -> tuple[bool, str | None]:
    for i, arg in enumerate(argv):
        if arg.startswith(name + "="):
            return True, arg.split("=", 1)[1]
        if arg == name or (short and arg == short):
            return True, argv[i + 1] if i + 1 < len(argv) else None
    return False, None


def run(argv: list[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) for an nvidia-smi command line."""
    try:
        profile = load_profile()
    except ProfileError as exc:
        return 9, "", f"bwtune fake nvidia-smi: {exc}\n"
    views = gpu_views(profile, holders())
    try:
        has_id, ids = _option(argv, "--id", "-i")
        if has_id:
            wanted = {int(x) for x in (ids or "").split(",") if x != ""}
            unknown = wanted - {g.index for g in views}
            if not wanted or unknown:
                return 6, "No devices were found\n", ""
            views = [g for g in views if g.index in wanted]
        _, fmt = _option(argv, "--format")
        has_q, gpu_fields = _option(argv, "--query-gpu")
        if has_q:
            return 0, query_gpu(views, (gpu_fields or "").split(","), fmt), ""
        has_apps, app_fields = _option(argv, "--query-compute-apps")
        if has_apps:
            return 0, query_apps(views, (app_fields or "").split(","), fmt), ""
        if "-q" in argv or "--query" in argv:
            if "-x" in argv or "--xml-format" in argv:
                return 0, xml_report(views, profile), ""
            return 0, xml_report(views, profile), ""
        if "-L" in argv or "--list-gpus" in argv:
            return 0, list_gpus(views), ""
        if not argv:
            return 0, summary(views, profile), ""
    except (UsageError, ValueError) as exc:
        return 2, f"{exc}\n\nPlease run 'nvidia-smi -h' for help.\n", ""
    return (
        2,
        f"Invalid combination of input arguments: {' '.join(argv)}\nPlease run 'nvidia-smi -h' for help.\n",
        "",
    )


def main(argv: list[str] | None = None) -> int:
    code, out, err = run(sys.argv[1:] if argv is None else argv)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return code


if __name__ == "__main__":
    sys.exit(main())
