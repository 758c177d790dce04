"""GPU readings through NVML (nvidia-ml-py): the one module that touches the pynvml library.

Every NVML call goes through `_query`, which turns "not supported" and other per-field errors
into None, so a partially supported GPU still yields a reading. A missing library or driver is the
state NO_GPU, not an exception.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from vtop.core.frame import (
    GpuReading,
    GpuSnapshot,
    GpuStatus,
    ProcessInfo,
)

CLOCK_EVENT_REASONS: tuple[tuple[int, str], ...] = (
    (0x1, "idle"),
    (0x2, "applications clocks setting"),
    (0x4, "software power cap"),
    (0x8, "hardware slowdown"),
    (0x10, "sync boost"),
    (0x20, "software thermal slowdown"),
    (0x40, "hardware thermal slowdown"),
    (0x80, "hardware power brake"),
    (0x100, "display clock setting"),
    (0x200, "board limit"),
    (0x400, "reliability"),
)


def decode_clock_event_reasons(mask: int) -> tuple[str, ...]:
    """Names of the clock-event (throttle) reasons set in an NVML bitmask."""
    return tuple(name for bit, name in CLOCK_EVENT_REASONS if mask & bit)


def _text(value: Any) -> str:
    """NVML strings arrive as bytes on older bindings."""
    return value.decode() if isinstance(value, bytes) else str(value)


RETRY_EVERY = 60
"""Reads between attempts to load NVML when it is missing (a driver rarely appears mid-run)."""


class NvmlSource:
    """Reads all GPUs; construct once, call `read()` every tick."""

    def __init__(self, nvml: Any = None) -> None:
        """`nvml` is the pynvml module, or a stand-in with the same calls (tests)."""
        self._nvml = nvml
        self._started = False
        self._state_message = ""
        self._reads_until_retry = 0

    def _start(self) -> bool:
        """Load and initialise NVML; after a failure, try again only every RETRY_EVERY reads."""
        if self._started:
            return True
        if self._reads_until_retry > 0:
            self._reads_until_retry -= 1
            return False
        self._reads_until_retry = RETRY_EVERY
        try:
            self._nvml = self._nvml or importlib.import_module("pynvml")
            self._nvml.nvmlInit()
        except ImportError as error:
            self._state_message = f"nvidia-ml-py not importable: {error}"
            return False
        except Exception as error:
            self._state_message = f"NVML unavailable: {error_name(error)}"
            return False
        self._started = True
        return True

    def read(self) -> GpuSnapshot:
        """A snapshot of every GPU, or the reason there is none."""
        if not self._start() or self._nvml is None:
            return GpuSnapshot(GpuStatus.NO_GPU, message=self._state_message)
        try:
            count = int(self._nvml.nvmlDeviceGetCount())
        except Exception as error:
            return GpuSnapshot(GpuStatus.ERROR, message=f"device count: {error_name(error)}")
        if count == 0:
            return GpuSnapshot(GpuStatus.NO_GPU, message="NVML reports no GPUs")
        driver = self._query(self._nvml.nvmlSystemGetDriverVersion, [])
        gpus = tuple(self._read_gpu(index) for index in range(count))
        return GpuSnapshot(GpuStatus.OK, gpus, None if driver is None else _text(driver))

    def close(self) -> None:
        """Shut NVML down if it was started."""
        if self._started and self._nvml is not None:
            self._query(self._nvml.nvmlShutdown, [])
            self._started = False

    def _query(self, call: Callable[..., Any], errors: list[str], *args: Any) -> Any:
        """Call NVML; on error record it and return None."""
        try:
            return call(*args)
        except Exception as error:
            name = error_name(error)
            if name != "NOT_SUPPORTED":
                errors.append(f"{getattr(call, '__name__', 'nvml')}: {name}")
            return None

    def _read_gpu(self, index: int) -> GpuReading:
        """Every field of one GPU, None where unsupported."""
        nvml, errors = self._nvml, list[str]()
        assert nvml is not None
        handle = self._query(nvml.nvmlDeviceGetHandleByIndex, errors, index)
        if handle is None:
            return GpuReading(index, errors=tuple(errors))
        q = self._query
        memory = q(nvml.nvmlDeviceGetMemoryInfo, errors, handle)
        utilization = q(nvml.nvmlDeviceGetUtilizationRates, errors, handle)
        reasons = self._clock_event_reasons(handle, errors)
        return GpuReading(
            index=index,
            name=_optional_text(q(nvml.nvmlDeviceGetName, errors, handle)),
            uuid=_optional_text(q(nvml.nvmlDeviceGetUUID, errors, handle)),
            utilization_pct=None if utilization is None else float(utilization.gpu),
            memory_used_bytes=None if memory is None else int(memory.used),
            memory_total_bytes=None if memory is None else int(memory.total),
            power_w=_milli(q(nvml.nvmlDeviceGetPowerUsage, errors, handle)),
            power_limit_w=_milli(q(nvml.nvmlDeviceGetEnforcedPowerLimit, errors, handle)),
            temperature_c=_float(q(nvml.nvmlDeviceGetTemperature, errors, handle, 0)),
            sm_clock_mhz=_int(q(nvml.nvmlDeviceGetClockInfo, errors, handle, 1)),
            sm_clock_max_mhz=_int(q(nvml.nvmlDeviceGetMaxClockInfo, errors, handle, 1)),
            clock_event_reasons=reasons,
            throttle_reasons=() if reasons is None else decode_clock_event_reasons(reasons),
            pcie_gen=_int(q(nvml.nvmlDeviceGetCurrPcieLinkGeneration, errors, handle)),
            pcie_gen_max=_int(q(nvml.nvmlDeviceGetMaxPcieLinkGeneration, errors, handle)),
            pcie_width=_int(q(nvml.nvmlDeviceGetCurrPcieLinkWidth, errors, handle)),
            pcie_width_max=_int(q(nvml.nvmlDeviceGetMaxPcieLinkWidth, errors, handle)),
            processes=self._processes(handle, errors),
            errors=tuple(errors),
        )

    def _clock_event_reasons(self, handle: Any, errors: list[str]) -> int | None:
        """The clock-event bitmask, through the new or the pre-12 API name."""
        nvml = self._nvml
        call = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        return None if call is None else _int(self._query(call, errors, handle))

    def _processes(self, handle: Any, errors: list[str]) -> tuple[ProcessInfo, ...]:
        """Compute and graphics processes on a GPU, each pid once."""
        nvml, found = self._nvml, {}
        assert nvml is not None
        for call in (
            nvml.nvmlDeviceGetComputeRunningProcesses,
            nvml.nvmlDeviceGetGraphicsRunningProcesses,
        ):
            for process in self._query(call, errors, handle) or []:
                used = getattr(process, "usedGpuMemory", None)
                found[int(process.pid)] = ProcessInfo(int(process.pid), _int(used))
        return tuple(found.values())


def error_name(error: BaseException) -> str:
    """NVML error constant name without its prefix (e.g. NOT_SUPPORTED), else the message."""
    name = type(error).__name__
    if name.startswith("NVMLError_"):
        return _snake_upper(name[len("NVMLError_") :])
    return str(error) or name


def _snake_upper(camel: str) -> str:
    """LibraryNotFound -> LIBRARY_NOT_FOUND."""
    out = "".join("_" + c if c.isupper() and i else c for i, c in enumerate(camel))
    return out.upper()


def _optional_text(value: Any) -> str | None:
    return None if value is None else _text(value)


def _int(value: Any) -> int | None:
    """NVML integers; the binding returns None-like sentinels for N/A memory on some drivers."""
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _milli(value: Any) -> float | None:
    """Milliwatts to watts."""
    return None if value is None else float(value) / 1000.0


def gpus_of_process(snapshot: GpuSnapshot, pids: set[int]) -> list[int]:
    """Indices of the GPUs on which any of `pids` runs (to find the vLLM process's GPUs)."""
    return [gpu.index for gpu in snapshot.gpus if any(p.pid in pids for p in gpu.processes)]
