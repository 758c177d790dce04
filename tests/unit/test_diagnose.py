"""Diagnose report, JSON schema, exit codes and config assembly (no server needed)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.frames import TARGET, down_frame, frame_from_text
from tests.support.frames import frame as numbers_frame
from tests.support.http_server import QuietHandler, serving_handler
from tests.support.payloads import DATA, fixture
from tests.support.storm import storm_frames
from tests.support.vtop_cli import vtop
from vtop.core.config.cache_config import cache_configs
from vtop.core.config.effective_config import server_config
from vtop.core.config.inference import EngineWindow, infer_max_num_seqs
from vtop.core.config.kv import ModelShape, bytes_per_token, capacity_tokens, max_num_seqs_for
from vtop.core.config.server_config import assemble, from_argv, from_log
from vtop.core.frame import Frame, ScrapeStatus, TargetScrape
from vtop.core.ingest.exposition import ExpositionParser
from vtop.core.ingest.sources.server_facts import read_model_facts
from vtop.core.rules.engine import ProposedChange
from vtop.core.rules.loader import load_rules
from vtop.core.session.diagnose import DiagnoseOptions, diagnose_frames, needed_window
from vtop.core.session.session import Session
from vtop.text.report import json_report, proposed_value, text_report


def test_storm_frames_give_a_critical_primary_with_a_flag_diff() -> None:
    options = DiagnoseOptions(vllm_args="vllm serve ./model --max-num-seqs 16")
    diagnosis = diagnose_frames(TARGET, storm_frames(), load_rules(), options)
    assert diagnosis.exit_code == 2 and diagnosis.verdict == "critical"
    text = text_report(diagnosis)
    assert "PRIMARY" in text and "M1 preemption storm" in text
    assert "  - --max-num-seqs 16" in text and "  + --max-num-seqs 1" in text
    report = json_report(diagnosis)
    assert report["schema"] == "vtop.diagnose/2"
    assert report["primary"]["id"] == "M1"
    assert report["primary"]["changes"][0]["argument"] == "--max-num-seqs 1"
    assert "Q1" in [s["id"] for s in report["primary"]["symptoms"]]
    json.dumps(report)


def test_json_types_every_value_for_a_script() -> None:
    options = DiagnoseOptions(vllm_args="vllm serve ./model --max-num-seqs 16")
    report = json_report(diagnose_frames(TARGET, storm_frames(), load_rules(), options))
    change = report["primary"]["changes"][0] if report["primary"] else None
    every = [c for f in report["findings"] for c in f["changes"]]
    assert all(isinstance(c["proposed"], int | float | bool | str | None) for c in every)
    assert all(not isinstance(c["proposed"], str) or " " not in c["proposed"] for c in every)
    if change is not None and change["flag"] == "--max-num-seqs":
        assert change["current"] == 16 and isinstance(change["current"], int)
    assert report["config"]["max_num_seqs"]["value"] == 16
    assert isinstance(report["config"]["max_num_seqs"]["value"], int)
    assert report["events"] and all(
        set(event) == {"time", "kind", "target", "message"} for event in report["events"]
    )
    assert "preemptions" in {event["kind"] for event in report["events"]}


def test_a_switch_is_true_or_false_and_a_word_stays_a_word() -> None:
    on = ProposedChange("--enable-prefix-caching", None, "--enable-prefix-caching", "", "")
    off = ProposedChange("--enable-prefix-caching", None, "--no-enable-prefix-caching", "", "")
    word = ProposedChange("--kv-cache-dtype", None, "--kv-cache-dtype fp8", "", "")
    count = ProposedChange("--max-num-seqs", 16.0, 8.0, "", "")
    assert [proposed_value(c) for c in (on, off, word, count)] == [True, False, "fp8", 8]
    assert isinstance(proposed_value(count), int)


def test_unknown_settings_are_reported_with_the_option_that_fixes_it() -> None:
    diagnosis = diagnose_frames(TARGET, storm_frames(), load_rules(), DiagnoseOptions())
    assert diagnosis.triage is not None
    primary = diagnosis.triage.primary
    assert primary is not None and primary.rule.id == "M1"
    change = next(c for c in primary.changes if c.flag == "--max-num-seqs")
    assert change.current is None and change.proposed == 1.0  # capacity is known, MNS is not
    unchecked = {u.rule.id: u.how for u in diagnosis.triage.unchecked}
    assert "--max-num-seqs" in unchecked["Q2"] and "--vllm-args" in unchecked["Q2"]
    assert "NOT CHECKED" in text_report(diagnosis)


def test_no_traffic_and_not_vllm_cannot_be_diagnosed() -> None:
    idle = [frame_from_text(float(t), fixture("idle")) for t in range(3)]
    quiet = diagnose_frames(TARGET, idle, load_rules(), DiagnoseOptions())
    assert quiet.exit_code == 3 and "no traffic" in (quiet.reason or "")
    not_vllm = TargetScrape(TARGET, ScrapeStatus.NOT_VLLM, error="no vllm: series")
    frames = [Frame(float(t), (not_vllm,)) for t in range(2)]
    diagnosis = diagnose_frames(TARGET, frames, load_rules(), DiagnoseOptions())
    assert diagnosis.exit_code == 3 and "not a vLLM endpoint" in (diagnosis.reason or "")
    assert json_report(diagnosis)["verdict"] == "unknown"


def test_cli_unreachable_exits_3_with_json_reason() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "vtop",
            "diagnose",
            "http://127.0.0.1:9",
            "--window",
            "0.5",
            "--interval",
            "0.2",
            "--json",
            "--no-gpu",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 3
    report = json.loads(out.stdout)
    assert report["verdict"] == "unknown" and report["reason"].startswith("unreachable")


def test_config_from_real_startup_log_and_scrape() -> None:
    log = (DATA / "vllm-0.32-cpu-serve.log").read_text()
    settings, facts = from_log(log)
    assert settings["max_num_seqs"].value == 16 and settings["max_num_seqs"].source == "log"
    assert settings["kv_capacity_tokens"].value == 1024
    assert settings["max_model_len"].value == 512
    assert facts.version == "0.32.0" and facts.init_seconds == pytest.approx(19.29)
    samples = ExpositionParser().parse(fixture("underload")).samples
    config = assemble(log_text=log, cache_configs=cache_configs(samples))
    metrics = config.pseudo_metrics()
    assert metrics["vtop:kv_capacity_tokens"] == 1024 and metrics["vtop:prefix_caching"] == 1.0
    assert metrics["vtop:max_num_batched_tokens"] is None  # not logged on this build: unknown
    assert metrics["vtop:num_gpu_blocks_override"] == 8  # this server pins its KV pool
    assert metrics["vtop:kv_cache_fp8"] == 0.0


def test_kv_pool_settings_default_to_unset_once_anything_is_known() -> None:
    fp8 = assemble(argv="vllm serve m --kv-cache-dtype fp8_e4m3").pseudo_metrics()
    assert fp8["vtop:kv_cache_fp8"] == 1.0 and fp8["vtop:num_gpu_blocks_override"] == 0.0
    assert fp8["vtop:kv_cache_memory_bytes"] == 0.0
    pinned = assemble(argv="vllm serve m --num-gpu-blocks-override 512").pseudo_metrics()
    assert pinned["vtop:num_gpu_blocks_override"] == 512
    assert assemble().pseudo_metrics()["vtop:num_gpu_blocks_override"] is None


def test_argv_forms_and_precedence() -> None:
    argv = (
        "vllm serve org/model -tp 2 --max-num-seqs=64 --no-enable-prefix-caching"
        " --gpu-memory-utilization 0.9"
    )
    settings = from_argv(argv)
    assert settings["model"].value == "org/model"
    assert settings["tensor_parallel_size"].value == 2
    assert settings["max_num_seqs"].value == 64
    assert settings["prefix_caching"].value is False
    config = assemble(argv=argv, gpu_memory_bytes=141 * 2**30, gpu_name="NVIDIA H200")
    assert config.settings["max_num_seqs"].source == "argv"
    assert config.settings["max_num_batched_tokens"].value == 8192
    assert (
        assemble(gpu_memory_bytes=80 * 2**30, gpu_name="NVIDIA A100-SXM4-80GB").get("max_num_seqs")
        == 256
    )
    assert assemble().get("max_num_seqs") is None  # no GPU, no guess


def test_kv_formula_reproduces_the_seed_example() -> None:
    shape = ModelShape(layers=40, kv_heads=8, head_dim=128)
    assert bytes_per_token(shape) == 163_840
    capacity = capacity_tokens(20 * 2**30, 163_840)
    assert capacity == 131_072
    assert capacity // 4096 == 32
    assert bytes_per_token(shape, "fp8") == 81_920
    assert bytes_per_token(shape, tp=16) == 40 * 1 * 128 * 2 * 2  # TP beyond KV heads replicates
    assert max_num_seqs_for(1024, 96, 300) == 2  # 63 usable 16-token blocks, 25 per request
    assert max_num_seqs_for(1024, 96, 300, block_size=128) == 1  # 7 usable blocks, 4 per request


def test_kv_shape_from_configs() -> None:
    mla = ModelShape.from_config(
        {
            "num_hidden_layers": 61,
            "num_attention_heads": 128,
            "hidden_size": 7168,
            "kv_lora_rank": 512,
            "qk_rope_head_dim": 64,
            "torch_dtype": "bfloat16",
        }
    )
    assert bytes_per_token(mla, tp=8) == 61 * 576 * 2
    gqa = ModelShape.from_config(
        {
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "hidden_size": 4096,
            "torch_dtype": "bfloat16",
        }
    )
    assert bytes_per_token(gqa) == 131_072


TINY_CONFIG = {
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "hidden_size": 128,
    "head_dim": 64,
    "torch_dtype": "bfloat16",
}


def test_the_model_config_is_read_once_at_the_edge_and_carried_as_data(tmp_path: Path) -> None:
    """KV bytes per token come from the model's config.json, read by the source (or the
    command line), never by the session: a frame that carries the geometry gives the same
    figure on a host without the model directory, and the core alone reads no file."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(TINY_CONFIG))
    facts = read_model_facts(str(model))
    told = DiagnoseOptions(vllm_args=f"--model {model}", model_facts=facts)
    assert server_config(None, None, told).number("kv_bytes_per_token") == 512
    untold = DiagnoseOptions(vllm_args=f"--model {model}")
    assert server_config(None, None, untold).number("kv_bytes_per_token") is None
    served = (("model", str(model), "/v1/models"), *facts)
    scrape = TargetScrape("http://x", ScrapeStatus.OK, server_settings=served)
    (model / "config.json").unlink()  # a replay on another host: the directory is not there
    config = server_config(scrape, None, DiagnoseOptions())
    assert config.number("kv_bytes_per_token") == 512
    assert config.settings["model_layers"].source == "model config.json"


def test_kv_cli_seed_example() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "vtop",
            "kv",
            "--layers",
            "40",
            "--kv-heads",
            "8",
            "--head-dim",
            "128",
            "--kv-memory-gib",
            "20",
            "--seq-len",
            "4096",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "163,840 B" in out.stdout and "131,072 tokens" in out.stdout
    assert "4,096 tokens per request: 32.0" in out.stdout


SPEC_DECODE = """# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="m"}} {a}
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="m"}} {d}
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="m"}} 2
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{engine="0",model_name="m"}} {g}
"""


def spec_decode_frames(seconds: int) -> list[Frame]:
    """A server whose drafts are mostly rejected (SD1 needs 30 s of it)."""
    return [
        frame_from_text(float(t), SPEC_DECODE.format(a=t, d=10 * t, g=50 * t))
        for t in range(seconds)
    ]


def test_a_rule_longer_than_the_window_is_not_checked_rather_than_ok() -> None:
    rules = load_rules()
    short = diagnose_frames(TARGET, spec_decode_frames(16), rules, DiagnoseOptions(read_gpus=False))
    assert short.triage is not None
    unchecked = {u.rule.id: u.how for u in short.triage.unchecked}
    assert "SD1" in unchecked and "--window 35" in unchecked["SD1"], unchecked
    assert "SD1" in text_report(short).split("NOT CHECKED")[1]
    assert "G1" not in unchecked  # no GPU series: its inputs do not exist here
    long = diagnose_frames(TARGET, spec_decode_frames(40), rules, DiagnoseOptions(read_gpus=False))
    assert long.triage is not None and long.triage.primary is not None
    assert long.triage.primary.rule.id == "SD1"
    assert "SD1" not in {u.rule.id for u in long.triage.unchecked}


def test_the_rules_a_first_frame_can_feed_decide_the_window() -> None:
    rules = load_rules()
    window, longer = needed_window(spec_decode_frames(1)[0], rules, DiagnoseOptions())
    assert (window, [r.id for r in longer]) == (35.0, ["SD1"])  # SD2's per-position counts absent
    plain = frame_from_text(
        0.0, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 2\n"
    )
    assert needed_window(plain, rules, DiagnoseOptions()) == (15.0, ())  # P2 needs a GPU too


class GrowingDrafts(QuietHandler):
    """A server whose drafts are mostly rejected, counters growing with the clock."""

    started = time.time()

    def do_GET(self) -> None:
        t = time.time() - self.started
        body = SPEC_DECODE.format(a=t, d=10 * t, g=50 * t)
        self.reply(200, body.encode() if self.path == "/metrics" else b"ok")


def test_diagnose_samples_as_long_as_a_rule_the_server_feeds_needs_and_says_so() -> None:
    with serving_handler(GrowingDrafts) as url:
        ran = vtop("diagnose", url, "--no-gpu", "--json", "--no-predict", timeout_s=90)
    assert "sampling 35 s, not 15: SD1" in ran.err, ran.err
    report = json.loads(ran.out)
    assert report["primary"]["id"] == "SD1", report["primary"]
    assert ran.code == 1 and 35 <= report["window_s"] < 40, (ran.code, report["window_s"])
    assert "SD1" not in {u["id"] for u in report["unchecked"]}


PINNED_TICK = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0"}} 4
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0"}} 20
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0"}} 0.01
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{engine="0"}} {g}
# TYPE vllm:request_inference_time_seconds histogram
vllm:request_inference_time_seconds_sum{{engine="0"}} {busy}
# TYPE vllm:request_prefill_time_seconds histogram
vllm:request_prefill_time_seconds_sum{{engine="0"}} {prefill}
# TYPE vllm:request_prompt_tokens histogram
vllm:request_prompt_tokens_sum{{engine="0"}} {p}
vllm:request_prompt_tokens_count{{engine="0"}} {n}
# TYPE vllm:request_generation_tokens histogram
vllm:request_generation_tokens_sum{{engine="0"}} {o}
vllm:request_generation_tokens_count{{engine="0"}} {n}
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{{block_size="16",engine="0",kv_cache_size_tokens="100000"}} 1.0
"""


def pinned_frames(seconds: int) -> list[Frame]:
    """Running held at 4 with 20 waiting and KV free; nobody said max-num-seqs."""
    return [
        frame_from_text(
            float(t),
            PINNED_TICK.format(g=100 * t, busy=4 * t, prefill=0.3 * t, p=40 * t, o=256 * t, n=t),
        )
        for t in range(seconds)
    ]


def test_a_one_shot_diagnosis_judges_the_window_with_what_the_whole_window_infers() -> None:
    frames, rules = pinned_frames(13), load_rules()
    diagnosis = diagnose_frames(TARGET, frames, rules, DiagnoseOptions(read_gpus=False))
    assert diagnosis.triage is not None and diagnosis.triage.primary is not None
    assert diagnosis.triage.primary.rule.id == "Q2"
    setting = diagnosis.config.settings["max_num_seqs"]
    assert setting.value == 4 and setting.source.startswith("inferred: running held at 4")
    report = json_report(diagnosis)
    assert report["primary"]["inferred"]["max_num_seqs"]["value"] == 4
    assert "max_num_seqs = 4 is inferred" in text_report(diagnosis)
    # live, the inference comes 10 s in and Q2 must then hold 5 s: not yet at 12 s
    live = Session(rules, DiagnoseOptions(read_gpus=False))
    for frame in frames:
        live.ingest(frame)
    triage = live.target(TARGET).triage
    assert triage is not None and "Q2" not in {f.rule.id for f in triage.findings}


def test_an_endpoint_that_stops_answering_keeps_the_evidence_before_and_says_so() -> None:
    frames = storm_frames()
    end = frames[-1].timestamp
    timed_out = TargetScrape(TARGET, ScrapeStatus.UNREACHABLE, error="no answer within 10 s")
    frames += [Frame(end + 1, (timed_out,)), Frame(end + 2, (timed_out,))]
    options = DiagnoseOptions(vllm_args="vllm serve ./model --max-num-seqs 16")
    diagnosis = diagnose_frames(TARGET, frames, load_rules(), options)
    assert diagnosis.triage is not None and diagnosis.triage.primary is not None
    assert diagnosis.triage.primary.rule.id == "M1" and diagnosis.exit_code == 2
    assert diagnosis.stopped_answering is not None
    assert "last 2 scrape(s)" in diagnosis.stopped_answering
    assert "ENDPOINT STOPPED ANSWERING" in text_report(diagnosis)
    assert "no answer within 10 s" in json_report(diagnosis)["stopped_answering"]


def test_a_healthy_window_whose_end_went_unanswered_is_a_warning() -> None:
    types = {"vllm:num_requests_running": "gauge", "vllm:generation_tokens_total": "counter"}
    frames = [
        numbers_frame(
            t, types, {"vllm:num_requests_running": 1, "vllm:generation_tokens_total": 20 * t}
        )
        for t in range(20)
    ]
    healthy = diagnose_frames(TARGET, frames, load_rules(), DiagnoseOptions())
    assert healthy.verdict == "ok" and healthy.stopped_answering is None
    frames.append(down_frame(20.0))
    diagnosis = diagnose_frames(TARGET, frames, load_rules(), DiagnoseOptions())
    assert diagnosis.verdict == "warning" and diagnosis.exit_code == 1
    assert diagnosis.stopped_answering is not None and "refused" in diagnosis.stopped_answering


def cap_window(peak: float, share: float, little: float) -> EngineWindow:
    """A queued engine with KV free whose running gauge and Little's law say what they say."""
    return EngineWindow(
        labels=(("engine", "0"),),
        span_s=14.9,
        scrapes=11,
        running_peak=peak,
        running_share_at_peak=share,
        running_little=little,
        waiting=35.0,
        kv_peak=0.001,
        preemptions=0.0,
        generated=11974.0,
        tokens_per_step=24.4,
        prefilling=0.39,
        prompt_p99=497.0,
    )


def test_a_cap_the_gauge_misses_between_steps_is_inferred_from_littles_law() -> None:
    # figures of a real sequence cap of 2 on a busy 2-core host: the gauge read 2 at 9% of scrapes
    missed = cap_window(peak=2, share=0.09, little=1.88)
    assert missed.pinned
    inferred = infer_max_num_seqs(missed, None)
    assert inferred is not None and inferred.value == 2, inferred
    assert inferred.source.startswith("inferred: running held at 2"), inferred
    # and one whose gauge read 1 at every scrape while the counters say 2.00 ran throughout
    under_read = cap_window(peak=1, share=1.0, little=2.0004)
    inferred = infer_max_num_seqs(under_read, None)
    assert inferred is not None and inferred.value == 2, inferred
    # a mean between whole numbers above the peak says nothing about a cap
    assert infer_max_num_seqs(cap_window(peak=1, share=1.0, little=1.5), None) is None
    # a batch wandering near a large peak implies nothing: Little's mean 11 of a peak of 12
    wandering = cap_window(peak=12, share=0.05, little=11.0)
    assert not wandering.pinned and infer_max_num_seqs(wandering, None) is None
