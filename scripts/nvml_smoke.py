"""Print real GPU readings through vtop's NVML module; run on a GPU host."""

from __future__ import annotations

import sys
from dataclasses import asdict

from vtop.core.frame import GpuStatus
from vtop.core.ingest.sources.nvml import NvmlSource


def main() -> int:
    """Read every GPU twice and print each field; exit 1 when NVML is unavailable."""
    source = NvmlSource()
    try:
        for attempt in (1, 2):
            snapshot = source.read()
            print(
                f"read {attempt}: state={snapshot.state.value} driver={snapshot.driver_version} "
                f"{snapshot.message}"
            )
            for gpu in snapshot.gpus:
                for key, value in asdict(gpu).items():
                    print(f"  gpu{gpu.index}.{key} = {value}")
    finally:
        source.close()
    return 0 if snapshot.state is GpuStatus.OK else 1


if __name__ == "__main__":
    sys.exit(main())
