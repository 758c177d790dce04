"""A fake of the pynvml module: the one boundary vtop fakes, since no GPU exists here or in CI."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any


class NVMLError(Exception):
    """Base of the fake's errors, named like pynvml's generated subclasses."""


class NVMLError_NotSupported(NVMLError):
    pass


class NVMLError_LibraryNotFound(NVMLError):
    pass


class NVMLError_GpuIsLost(NVMLError):
    pass


@dataclass
class FakeGpu:
    """What one fake GPU reports; a field set to an exception class raises it."""

    name: Any = "NVIDIA H200"
    uuid: Any = "GPU-0000"
    util: Any = 87
    mem_used: Any = 130 * 2**30
    mem_total: Any = 141 * 2**30
    power_mw: Any = 650_000
    power_limit_mw: Any = 700_000
    temperature: Any = 64
    sm_clock: Any = 1980
    sm_clock_max: Any = 1980
    reasons: Any = 0
    pcie: Any = (5, 5, 16, 16)
    processes: Any = field(default_factory=lambda: [(4242, 120 * 2**30)])


class FakeNvml:
    """Quacks like the pynvml module for the calls vtop makes."""

    def __init__(self, gpus: list[FakeGpu], init_error: type[Exception] | None = None) -> None:
        self.gpus = gpus
        self.init_error = init_error
        self.shutdown_calls = 0
        self.nvmlDeviceGetCurrentClocksEventReasons = self._reasons

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise self.init_error()

    def nvmlShutdown(self) -> None:
        self.shutdown_calls += 1

    def nvmlSystemGetDriverVersion(self) -> str:
        return "580.65.06"

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        return self.gpus[index]

    @staticmethod
    def _get(value: Any) -> Any:
        if isinstance(value, type) and issubclass(value, Exception):
            raise value()
        return value

    def nvmlDeviceGetName(self, gpu: FakeGpu) -> Any:
        return self._get(gpu.name)

    def nvmlDeviceGetUUID(self, gpu: FakeGpu) -> Any:
        return self._get(gpu.uuid)

    def nvmlDeviceGetUtilizationRates(self, gpu: FakeGpu) -> Any:
        return SimpleNamespace(gpu=self._get(gpu.util), memory=0)

    def nvmlDeviceGetMemoryInfo(self, gpu: FakeGpu) -> Any:
        return SimpleNamespace(used=self._get(gpu.mem_used), total=self._get(gpu.mem_total))

    def nvmlDeviceGetPowerUsage(self, gpu: FakeGpu) -> Any:
        return self._get(gpu.power_mw)

    def nvmlDeviceGetEnforcedPowerLimit(self, gpu: FakeGpu) -> Any:
        return self._get(gpu.power_limit_mw)

    def nvmlDeviceGetTemperature(self, gpu: FakeGpu, sensor: int) -> Any:
        return self._get(gpu.temperature)

    def nvmlDeviceGetClockInfo(self, gpu: FakeGpu, clock: int) -> Any:
        return self._get(gpu.sm_clock)

    def nvmlDeviceGetMaxClockInfo(self, gpu: FakeGpu, clock: int) -> Any:
        return self._get(gpu.sm_clock_max)

    def _reasons(self, gpu: FakeGpu) -> Any:
        return self._get(gpu.reasons)

    def nvmlDeviceGetCurrPcieLinkGeneration(self, gpu: FakeGpu) -> Any:
        return self._get(gpu.pcie)[0]

    def nvmlDeviceGetMaxPcieLinkGeneration(self, gpu: FakeGpu) -> Any:
        return self._get(gpu.pcie)[1]

    def nvmlDeviceGetCurrPcieLinkWidth(self, gpu: FakeGpu) -> Any:
        return self._get(gpu.pcie)[2]

    def nvmlDeviceGetMaxPcieLinkWidth(self, gpu: FakeGpu) -> Any:
        return self._get(gpu.pcie)[3]

    def nvmlDeviceGetComputeRunningProcesses(self, gpu: FakeGpu) -> Any:
        return [
            SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in self._get(gpu.processes)
        ]

    def nvmlDeviceGetGraphicsRunningProcesses(self, gpu: FakeGpu) -> Any:
        return []
