"""The scheduler model's speed: simulating 60 s of traffic at 256 concurrent sequences must
take under a second, so the dashboard can show a prediction without stalling a tick. Printed
against the simulated time (a real-time factor) and a 16-sequence run in the same process."""

from __future__ import annotations

import time

from vtop.core.whatif.scheduler import EngineConfig, StepCost, Workload, simulate

SIMULATED_S = 60.0


def timed(sequences: int) -> tuple[float, int]:
    """Seconds to simulate a closed loop that keeps `sequences` running, and its steps."""
    config = EngineConfig(sequences, 8192, 200_000, 16)
    workload = Workload(500, 200, clients=sequences + sequences // 8)
    started = time.perf_counter()
    outcome = simulate(config, workload, StepCost(0.02, 0.00001), SIMULATED_S)
    return time.perf_counter() - started, outcome.steps


def main() -> None:
    small, small_steps = timed(16)
    large, large_steps = timed(256)
    print(f"simulate {SIMULATED_S:.0f} s of traffic (closed loop, 500 + 200 tokens per request)")
    print(f"  16 sequences: {small * 1000:7.1f} ms ({small_steps} steps)")
    print(
        f" 256 sequences: {large * 1000:7.1f} ms ({large_steps} steps), "
        f"{SIMULATED_S / large:.0f}x real time, {large / small:.1f}x the 16-sequence run"
    )


if __name__ == "__main__":
    main()
