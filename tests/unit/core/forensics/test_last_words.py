"""Why an engine died, from its log: the root exception and its frame, the requests of the
failed step, and how the process ended."""

from __future__ import annotations

from pathlib import Path

from vtop.core.forensics.last_words import exit_meaning, last_words, why_it_exited

ROOT = Path(__file__).resolve().parents[4]
HEAD = "(APIServer pid=1) INFO 12-06 23:34:15 [launcher.py:1] Application startup complete.\n"
WORKER = "(Worker pid=3) ERROR 12-06 23:40:00 [multiproc_executor.py:800] "
CORE = "(EngineCore pid=2) ERROR 12-06 23:40:00 [core.py:1512] "
RAISED = f"""{WORKER}WorkerProc hit an exception.
{WORKER}Traceback (most recent call last):
{WORKER}  File "/venv/site-packages/vllm/v1/sample/sampler.py", line 10, in apply
{WORKER}    out = proc.apply(logits)
{WORKER}  File "/plug/faulty.py", line 33, in raise_on_request
{WORKER}    raise InjectedFaultError("boom")
{WORKER}faulty.InjectedFaultError: boom
{CORE}Dumping scheduler output for model execution: SchedulerOutput(scheduled_new_reqs=\
[NewRequestData(req_id=cmpl-abc-0,prompt_token_ids_len=5)], scheduled_cached_reqs=\
CachedRequestData(req_ids=['cmpl-def-0', 'cmpl-ghi-0']))
{CORE}EngineCore encountered a fatal error.
{CORE}Traceback (most recent call last):
{CORE}  File "/venv/site-packages/vllm/v1/executor/multiproc.py", line 300, in collective_rpc
{CORE}    raise RuntimeError(...)
{CORE}RuntimeError: Worker failed with error 'boom', please check the stack trace above
"""


def test_the_root_exception_its_frame_and_the_failed_step_s_requests() -> None:
    words = last_words(HEAD + RAISED)
    assert words is not None
    assert words.root is not None and words.root.exception == "faulty.InjectedFaultError: boom"
    assert words.root.raised_at is not None
    assert (words.root.raised_at.function, words.root.raised_at.line) == ("raise_on_request", 33)
    assert words.final is not None and words.final.exception.startswith("RuntimeError: Worker")
    assert words.requests == ("cmpl-abc-0", "cmpl-def-0", "cmpl-ghi-0")
    assert "InjectedFaultError: boom, raised in raise_on_request" in words.summary


def test_a_log_with_no_failure_or_a_restart_after_it_has_no_last_words() -> None:
    assert last_words(HEAD + "(APIServer pid=1) INFO all is well\n") is None
    assert last_words("") is None
    assert last_words(RAISED + HEAD) is None


def test_a_worker_killed_without_a_traceback_points_at_the_oom_killer() -> None:
    log = HEAD + (
        "(EngineCore pid=2) ERROR 12-06 23:41:00 [multiproc_executor.py:316] Worker proc "
        "VllmWorker-0 died unexpectedly (exit code: -9), shutting down executor.\n"
    )
    words = last_words(log)
    assert words is not None and words.root is None
    assert words.ended is not None and "SIGKILL" in words.ended and "OOM" in words.ended
    assert "SIGKILL" in words.summary
    assert exit_meaning(1) == "exited with code 1"
    assert exit_meaning(-15) == "was ended by SIGTERM"


def test_secrets_in_the_log_are_redacted() -> None:
    log = HEAD + RAISED.replace("boom", "boom api_key=sk-abcdefghijklmnop1234")
    words = last_words(log)
    assert words is not None and words.root is not None
    assert "sk-abcdefghijklmnop1234" not in words.root.exception
    assert all("sk-abcdefghijklmnop1234" not in line for line in words.excerpt)


def test_hostile_logs_do_not_raise() -> None:
    junk = "\x00\xff" * 1000 + "\nTraceback (most recent call last):\n" + "  File \n" * 100
    assert last_words(junk + "EngineCore encountered a fatal error.\n") is not None
    assert last_words("Traceback (most recent call last):\n") is None


def test_a_real_vllm_crash_log_from_a_raising_logits_processor() -> None:
    """Captured from vLLM 0.32 (CPU build) when tests/e2e's faulty logits processor raised."""
    log = (ROOT / "tests" / "data" / "vllm-0.32-cpu-logits-processor-crash.log").read_text()
    words = last_words(log)
    assert words is not None and words.marker == "WorkerProc hit an exception."
    assert words.root is not None and words.root.raised_at is not None
    assert words.root.exception.startswith("faulty_logits.InjectedFaultError: vtop test fault")
    assert words.root.raised_at.function == "raise_on_request"
    assert words.final is not None and "EngineDeadError" in words.final.exception
    assert words.requests == ("cmpl-vtop-fault-raise-0-9e5c954e",)


def test_why_a_managed_server_exited_in_one_line() -> None:
    log = (ROOT / "tests" / "data" / "vllm-0.32-cpu-logits-processor-crash.log").read_text()
    why = why_it_exited(log)
    assert why.startswith("the engine died: faulty_logits.InjectedFaultError") and "log line" in why
    refused = "ValueError: max_num_seqs must be positive\n"
    assert why_it_exited(refused).startswith("vLLM refused the configuration")
    assert why_it_exited(HEAD + "(APIServer pid=1) INFO shutting down\n") == ""
