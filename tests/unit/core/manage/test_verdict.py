"""Applying a proposed change to an argv, the diff shown before it, and judging the result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.frames import frame_from_text
from tests.support.storm import CACHE_LABELS, STORM_TICK, storm
from vtop.core.frame import Frame
from vtop.core.manage.audit import audit
from vtop.core.manage.flag_edits import apply_change, argv_diff
from vtop.core.manage.verdict import Measurement, judge, measure
from vtop.core.rules.engine import Finding, ProposedChange
from vtop.core.rules.loader import load_rules
from vtop.core.session.diagnose import DiagnoseOptions, diagnose_frames
from vtop.core.store.store import Store

ARGV = ["vllm", "serve", "./m", "--max-num-seqs", "16", "--no-enable-prefix-caching", "--port=9"]


def change(flag: str, proposed: float | str | None) -> ProposedChange:
    return ProposedChange(flag, None, proposed, "why", "effect")


def test_a_numeric_flag_replaces_the_old_value() -> None:
    new = apply_change(ARGV, change("--max-num-seqs", 1.0))
    assert new == [*ARGV[:3], "--no-enable-prefix-caching", "--port=9", "--max-num-seqs", "1"]
    assert argv_diff(ARGV, new) == ["- --max-num-seqs 16", "+ --max-num-seqs 1"]


def test_a_literal_flag_replaces_its_negation_and_equals_forms() -> None:
    new = apply_change(ARGV, change("--enable-prefix-caching", "--enable-prefix-caching"))
    assert "--no-enable-prefix-caching" not in new and new[-1] == "--enable-prefix-caching"
    moved = apply_change(ARGV, change("--port", 10.0))
    assert "--port=9" not in moved and moved[-2:] == ["--port", "10"]
    fp8 = apply_change(ARGV, change("--kv-cache-dtype", "--kv-cache-dtype fp8"))
    assert fp8[-2:] == ["--kv-cache-dtype", "fp8"]
    assert argv_diff(ARGV, fp8) == ["+ --kv-cache-dtype fp8"]


def test_an_uncomputable_change_is_refused() -> None:
    unknown = ProposedChange("--max-num-seqs", None, None, "w", "e", ("vtop:max_num_seqs",))
    with pytest.raises(ValueError, match="vtop:max_num_seqs unknown"):
        apply_change(ARGV, unknown)


def test_advice_in_words_is_never_applied_as_argv() -> None:
    """Prose a rule suggests (an nginx setting, a flag to remove) is shown, never set: applying
    "(remove --speculative-config)" would hand vLLM the words as arguments."""
    for advice in (
        change("--speculative-config", "(remove --speculative-config)"),
        change("--speculative-config", "(fewer num_speculative_tokens in --speculative-config)"),
        change("proxy_buffering", "nginx: proxy_buffering off; gzip off;"),
    ):
        assert advice.argument() is None, advice
        with pytest.raises(ValueError, match="advice, not a flag"):
            apply_change(ARGV, advice)
    assert change("--api-server-count", "--api-server-count 2").argument() == [
        "--api-server-count",
        "2",
    ]


def test_a_dotted_flag_is_set_inside_the_json_of_its_flag() -> None:
    """vLLM appends dotted keys as a JSON of their own, after argv: set beside a written
    --speculative-config it would replace the method; so the key is merged into it."""
    written = '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3}'
    argv = [*ARGV, "--speculative-config", written]
    new = apply_change(argv, change("--speculative-config.num_speculative_tokens", 2.0))
    assert new[:-2] == ARGV and new[-2] == "--speculative-config"
    merged = json.loads(new[-1])
    assert merged == {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 3}
    assert argv_diff(argv, new) == [
        f"- --speculative-config {written}",
        f"+ --speculative-config {new[-1]}",
    ]
    alone = apply_change(ARGV, change("--speculative-config.num_speculative_tokens", 2.0))
    assert alone[-2:] == ["--speculative-config.num_speculative_tokens", "2"]
    with pytest.raises(ValueError, match="not a JSON object"):
        apply_change([*ARGV, "--speculative-config=ngram"], change("--speculative-config.n", 2.0))


def m1() -> Finding:
    diagnosis = diagnose_frames(
        "http://127.0.0.1:8000", [storm(t) for t in range(20)], load_rules(), DiagnoseOptions()
    )
    assert diagnosis.triage is not None and diagnosis.triage.primary is not None
    return diagnosis.triage.primary


def figures(preempt: float, tok_s: float, errors: int = 0) -> Measurement:
    return Measurement(preempt, 10.0, 1.0, 20.0, tok_s, errors)


def test_judge_uses_the_findings_target_metric_and_errors() -> None:
    finding = m1()
    assert judge(finding, figures(2.5, 300), figures(0.0, 280)).improved
    costly = judge(finding, figures(2.5, 300), figures(0.0, 200))
    assert not costly.improved and "output tok/s fell 33%" in costly.reason
    worse = judge(finding, figures(0.5, 300), figures(2.0, 300))
    assert not worse.improved and "preemptions_per_s did not improve" in worse.reason
    errors = judge(finding, figures(2.5, 300), figures(0.0, 300, errors=3))
    assert not errors.improved and "errors rose" in errors.reason
    noise = judge(finding, figures(3.0, 300), figures(2.9, 300))
    assert not noise.improved
    unmeasured = judge(finding, figures(2.5, 300), Measurement(None, None, None, None, None))
    assert not unmeasured.improved


def noisy(before: float, after: float, noise: float) -> tuple[Measurement, Measurement]:
    spread = {"preemptions_per_s": noise}
    return (
        Measurement(before, 10.0, 1.0, 20.0, 300, noise=spread),
        Measurement(after, 10.0, 1.0, 20.0, 300, noise=spread),
    )


def test_a_change_smaller_than_the_noise_is_not_an_improvement() -> None:
    finding = m1()
    within = judge(finding, *noisy(3.0, 2.0, 0.5))
    assert not within.improved and "within the noise" in within.reason
    assert judge(finding, *noisy(3.0, 0.5, 0.5)).improved


def tick(t: int, waiting: int) -> Frame:
    """A storm scrape at second t with the given number of waiting requests."""
    text = STORM_TICK.format(
        p=3 * t, g=300 * t, n=t, ps=96 * t, gs=300 * t, cache_labels=CACHE_LABELS
    )
    return frame_from_text(float(t), text.replace("} 10\n", f"}} {waiting}\n", 1))


def measured(frames: list[Frame]) -> Measurement:
    store = Store()
    for frame in frames:
        store.ingest(frame)
    return measure(store, frames[0].scrapes[0].target, frames[-1].timestamp, 30.0)


def test_measure_estimates_noise_from_the_spread_across_the_window() -> None:
    steady = measured([tick(t, 10) for t in range(31)])
    assert steady.waiting == pytest.approx(10) and steady.preemptions_per_s == pytest.approx(3)
    assert steady.noise["waiting"] == pytest.approx(0) and steady.noise["preemptions_per_s"] < 0.01
    bursty = measured([tick(t, 0 if (t // 5) % 2 else 20) for t in range(31)])
    assert bursty.noise["waiting"] > 2 and bursty.noise["preemptions_per_s"] < 0.01


def test_waiting_is_read_from_queue_time_when_the_gauge_reads_low() -> None:
    frames = [tick(t, 0) for t in range(31)]
    sum_line = 'vllm:request_queue_time_seconds_sum{{engine="0",model_name="m"}} {}\n'
    queued = [
        frame_from_text(f.timestamp, f.scrapes[0].raw_text + sum_line.format(6 * f.timestamp))
        for f in frames
    ]
    assert measured(frames).waiting == pytest.approx(0)
    assert measured(queued).waiting == pytest.approx(6)  # Little's law: 6 queue-seconds per second


def test_audit_log_is_json_lines(tmp_path: Path) -> None:
    audit(tmp_path, "apply", server="s", diff=("- a", "+ b"), before=figures(1, 2))
    audit(tmp_path, "rollback", server="s")
    entries = [json.loads(line) for line in (tmp_path / "audit.log").read_text().splitlines()]
    assert [e["action"] for e in entries] == ["apply", "rollback"]
    assert entries[0]["before"]["preemptions_per_s"] == 1 and entries[0]["diff"] == ["- a", "+ b"]
