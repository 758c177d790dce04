"""Floor 6, whatif: a model of vLLM"s V1 scheduler calibrated on a window, replayed with changed
flags, and the step profile it learns from. Imports rules, config, the store and the leaves
(never session or above).

Offers `whatif`, `calibrate` and `predict_change` (predict), `CannotModelError` (calibrate),
the simulator (scheduler), the step-time fit (step_time) and `StepProfiles` (profile).
"""

__all__ = ["calibrate", "predict", "profile", "scheduler", "step_time"]
