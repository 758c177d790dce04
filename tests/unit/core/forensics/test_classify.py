"""What a process does, from its stack samples, and where the engine is (the engine core
followed to the worker it waits on)."""

from __future__ import annotations

from vtop.core.forensics.classify import (
    Activity,
    code_owner,
    owner_of,
    process_activity,
    thread_activity,
    where_engine_is,
)
from vtop.core.forensics.processes import Role, ServerProcess
from vtop.core.forensics.pyspy import CodeFrame, ThreadStack
from vtop.core.forensics.stacks import ProcessStacks, ServerStacks

SITE = "/venv/lib/python3.11/site-packages"
STDLIB = "/usr/lib/python3.11"


def frame(function: str, file: str, line: int = 1) -> CodeFrame:
    return CodeFrame(function, file, line)


def thread(*frames: CodeFrame, active: bool = False, name: str = "MainThread") -> ThreadStack:
    return ThreadStack(name, 1, active, active, frames)


SPIN = thread(
    frame("spin_until_killed", "/srv/plugins/faulty_logits.py", 24),
    frame("apply", "/srv/plugins/faulty_logits.py", 50),
    frame("apply_logits_processors", f"{SITE}/vllm/v1/sample/sampler.py", 90),
    frame("worker_busy_loop", f"{SITE}/vllm/v1/executor/multiproc_executor.py", 700),
    active=True,
)
WAITING_ON_WORKER = thread(
    frame("acquire_read", f"{SITE}/vllm/distributed/device_communicators/shm_broadcast.py"),
    frame("dequeue", f"{SITE}/vllm/distributed/device_communicators/shm_broadcast.py"),
    frame("collective_rpc", f"{SITE}/vllm/v1/executor/multiproc_executor.py", 300),
    frame("step", f"{SITE}/vllm/v1/engine/core.py"),
    active=True,
)
IDLE_CORE = thread(
    frame("wait", f"{STDLIB}/threading.py", 327),
    frame("get", f"{STDLIB}/queue.py", 171),
    frame("_process_input_queue", f"{SITE}/vllm/v1/engine/core.py", 900),
)
COMPUTING = thread(
    frame("forward", f"{SITE}/torch/nn/modules/linear.py"),
    frame("execute_model", f"{SITE}/vllm/v1/worker/gpu_model_runner.py"),
    active=True,
)
ASYNC_IDLE = thread(
    frame("select", f"{STDLIB}/selectors.py", 468),
    frame("_run_once", f"{STDLIB}/asyncio/base_events.py", 1898),
)
TOKENIZING = thread(
    frame("encode", f"{SITE}/transformers/tokenization_utils_fast.py"),
    frame("_normalize_prompt", f"{SITE}/vllm/entrypoints/renderer.py"),
    active=True,
    name="ThreadPoolExecutor-0_0",
)
SLEEPING_PLUGIN = thread(
    frame("sleep_forever", "/srv/plugins/slow.py", 7),
    frame("apply", "/srv/plugins/slow.py", 12),
    frame("apply_logits_processors", f"{SITE}/vllm/v1/sample/sampler.py", 90),
)


def process(pid: int, role: Role, state: str = "sleeping") -> ServerProcess:
    return ServerProcess(pid, role, f"VLLM::{role}", state)


def stacks(pid: int, role: Role, *samples: ThreadStack, state: str = "sleeping") -> ProcessStacks:
    return ProcessStacks(process(pid, role, state), tuple((s,) for s in samples))


def server(*processes: ProcessStacks) -> ServerStacks:
    return ServerStacks(processes, 0.0, 1.5)


def test_owners_are_read_from_the_path() -> None:
    assert owner_of(f"{SITE}/vllm/v1/engine/core.py") == "vllm"
    assert owner_of(f"{SITE}/torch/nn/functional.py") == "torch"
    assert owner_of(f"{SITE}/my_plugin/lp.py") == "my_plugin"
    assert owner_of(f"{STDLIB}/threading.py") == "python"
    assert owner_of("<frozen importlib._bootstrap>") == "python"
    assert owner_of("/home/me/vllm/vllm/v1/engine/core.py") == "vllm"
    assert owner_of("/srv/plugins/faulty_logits.py") == "custom"


def test_one_thread_at_one_instant() -> None:
    assert thread_activity(SPIN, Role.WORKER).activity is Activity.SPINNING
    assert thread_activity(WAITING_ON_WORKER, Role.ENGINE_CORE).activity is (
        Activity.WAITING_ON_WORKER
    )
    assert thread_activity(IDLE_CORE, Role.ENGINE_CORE).activity is Activity.WAITING_FOR_WORK
    assert thread_activity(COMPUTING, Role.WORKER).activity is Activity.COMPUTING
    assert thread_activity(ASYNC_IDLE, Role.API_SERVER).activity is Activity.WAITING_FOR_WORK
    assert thread_activity(TOKENIZING, Role.API_SERVER).activity is Activity.TOKENIZER
    assert thread_activity(SLEEPING_PLUGIN, Role.WORKER).activity is Activity.BLOCKED


def test_the_engine_core_waiting_is_followed_to_the_spinning_worker() -> None:
    found = where_engine_is(
        server(
            stacks(10, Role.API_SERVER, ASYNC_IDLE, ASYNC_IDLE),
            stacks(11, Role.ENGINE_CORE, WAITING_ON_WORKER, WAITING_ON_WORKER),
            stacks(12, Role.WORKER, SPIN, SPIN),
        )
    )
    assert found.activity is Activity.SPINNING and found.stuck
    assert found.speaker is not None and found.speaker.process.pid == 12
    assert found.speaker.where == SPIN.frames[0]
    assert found.via is not None and found.via.process.pid == 11
    assert "custom logits processor" in found.owner and "faulty_logits.py" in found.owner


def test_a_stopped_process_is_stopped_whatever_its_last_stack() -> None:
    found = where_engine_is(
        server(
            stacks(11, Role.ENGINE_CORE, WAITING_ON_WORKER),
            stacks(12, Role.WORKER, SPIN, state="stopped"),
        )
    )
    assert found.activity is Activity.STOPPED and found.stuck
    assert found.speaker is not None and found.speaker.process.pid == 12


def test_a_working_or_idle_engine_is_not_stuck() -> None:
    working = where_engine_is(
        server(
            stacks(11, Role.ENGINE_CORE, WAITING_ON_WORKER, WAITING_ON_WORKER),
            stacks(12, Role.WORKER, COMPUTING, COMPUTING),
        )
    )
    assert working.activity is Activity.COMPUTING and not working.stuck
    assert "vLLM" in working.owner or "PyTorch" in working.owner
    idle = where_engine_is(server(stacks(11, Role.ENGINE_CORE, IDLE_CORE, IDLE_CORE)))
    assert idle.activity is Activity.WAITING_FOR_WORK and not idle.stuck


def test_an_idle_engine_behind_a_busy_tokenizer_is_the_tokenizer() -> None:
    found = where_engine_is(
        server(
            stacks(10, Role.API_SERVER, TOKENIZING, TOKENIZING),
            stacks(11, Role.ENGINE_CORE, IDLE_CORE, IDLE_CORE),
        )
    )
    assert found.activity is Activity.TOKENIZER
    assert found.speaker is not None and found.speaker.process.pid == 10


def test_the_most_common_activity_of_the_samples_speaks() -> None:
    mixed = stacks(12, Role.WORKER, COMPUTING, SPIN, SPIN, SPIN)
    found = process_activity(mixed)
    assert found.activity is Activity.SPINNING and found.share == 0.75 and found.samples == 4
    assert process_activity(stacks(12, Role.WORKER)).activity is Activity.UNKNOWN


def test_whose_code_names_the_package_or_the_file() -> None:
    packaged = (frame("loop", f"{SITE}/acme_guard/lp.py"), *SPIN.frames[2:])
    assert code_owner(packaged[0], packaged).startswith("the package acme_guard")
    alone = (frame("f", "/srv/x.py"),)
    assert code_owner(alone[0], alone) == "custom code (/srv/x.py)"
