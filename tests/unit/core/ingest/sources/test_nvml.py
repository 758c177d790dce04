"""NVML source against the fake pynvml: full, partial, absent and failing GPUs."""

from __future__ import annotations

from tests.support.fakes.fake_pynvml import (
    FakeGpu,
    FakeNvml,
    NVMLError_GpuIsLost,
    NVMLError_LibraryNotFound,
    NVMLError_NotSupported,
)
from vtop.core.frame import GpuStatus
from vtop.core.ingest.sources.nvml import NvmlSource, decode_clock_event_reasons, gpus_of_process


def test_full_reading() -> None:
    snapshot = NvmlSource(FakeNvml([FakeGpu(reasons=0x4 | 0x40)])).read()
    assert snapshot.state is GpuStatus.OK
    [gpu] = snapshot.gpus
    assert gpu.name == "NVIDIA H200"
    assert gpu.power_w == 650.0 and gpu.power_limit_w == 700.0
    assert gpu.throttle_reasons == ("software power cap", "hardware thermal slowdown")
    assert (gpu.pcie_gen, gpu.pcie_width_max) == (5, 16)
    assert gpu.processes[0].pid == 4242
    assert gpu.errors == ()


def test_unsupported_fields_are_none_and_not_errors() -> None:
    gpu = FakeGpu(power_mw=NVMLError_NotSupported, pcie=NVMLError_NotSupported, name=b"Tesla T4")
    [reading] = NvmlSource(FakeNvml([gpu])).read().gpus
    assert reading.power_w is None and reading.pcie_gen is None
    assert reading.name == "Tesla T4"
    assert reading.utilization_pct == 87.0
    assert reading.errors == ()


def test_field_errors_are_recorded_and_other_gpus_still_read() -> None:
    snapshot = NvmlSource(FakeNvml([FakeGpu(temperature=NVMLError_GpuIsLost), FakeGpu()])).read()
    assert snapshot.gpus[0].temperature_c is None
    assert "GPU_IS_LOST" in snapshot.gpus[0].errors[0]
    assert snapshot.gpus[1].temperature_c == 64.0


def test_no_library_is_a_state_not_a_crash() -> None:
    snapshot = NvmlSource(FakeNvml([], init_error=NVMLError_LibraryNotFound)).read()
    assert snapshot.state is GpuStatus.NO_GPU
    assert "LIBRARY_NOT_FOUND" in snapshot.message


def test_real_pynvml_on_this_machine_reports_no_gpu_or_readings() -> None:
    snapshot = NvmlSource().read()
    assert snapshot.state in (GpuStatus.NO_GPU, GpuStatus.OK)


def test_zero_gpus() -> None:
    assert NvmlSource(FakeNvml([])).read().state is GpuStatus.NO_GPU


def test_decode_and_process_mapping() -> None:
    assert decode_clock_event_reasons(0x1 | 0x8) == ("idle", "hardware slowdown")
    snapshot = NvmlSource(FakeNvml([FakeGpu(processes=[(1, 5)]), FakeGpu()])).read()
    assert gpus_of_process(snapshot, {4242}) == [1]


def test_close_shuts_down_once() -> None:
    fake = FakeNvml([FakeGpu()])
    source = NvmlSource(fake)
    source.read()
    source.close()
    source.close()
    assert fake.shutdown_calls == 1
