"""A finding's alternatives ranked by what the model predicts each does."""

from __future__ import annotations

from tests.support.demo import APPLIED, FRAMES
from vtop.core.config.effective_config import DiagnoseOptions
from vtop.core.ops.rank import primary_predictions
from vtop.core.rules.loader import load_rules
from vtop.core.session.diagnose import judged_diagnosis
from vtop.text.whatif import json_predictions, text_predictions


def test_the_storm_s_alternatives_are_ranked_more_kv_before_fewer_sequences() -> None:
    frames = FRAMES[: APPLIED - 5]
    options = DiagnoseOptions(read_gpus=False)
    target = frames[-1].scrapes[0].target
    diagnosis, session = judged_diagnosis(target, frames, load_rules(), options)
    predictions = primary_predictions(session, diagnosis)
    assert predictions is not None and predictions.reason is None
    assert predictions.figure == "preemptions_per_s"
    flags = [ranked.change.flag for ranked in predictions.ranked]
    assert flags[0] == "--num-gpu-blocks-override" and "--max-num-seqs" in flags
    best, fewer = predictions.ranked[0], predictions.ranked[flags.index("--max-num-seqs")]
    assert best.keeps_throughput and not fewer.keeps_throughput
    assert best.predicted["preemptions_per_s"] == 0
    # the window identifies no cost of context: more blocks hold more, one sequence far fewer
    assert best.context_unpriced is not None and fewer.context_unpriced is not None
    assert best.context_unpriced[1] > 2 * best.context_unpriced[0]
    assert fewer.context_unpriced[1] < fewer.context_unpriced[0] / 2
    text = text_predictions(predictions)
    assert "(steps may run slower:" in text and "(steps may run faster:" in text
    shown = json_predictions(predictions)["alternatives"]
    assert shown[0]["context_unpriced"]["kv_tokens_predicted"] == best.context_unpriced[1]


def test_a_headline_the_model_does_not_rank_first_is_explained_in_the_same_report() -> None:
    frames = FRAMES[: APPLIED - 5]
    target = frames[-1].scrapes[0].target
    diagnosis, session = judged_diagnosis(
        target, frames, load_rules(), DiagnoseOptions(read_gpus=False)
    )
    predictions = primary_predictions(session, diagnosis)
    assert predictions is not None and predictions.headline == "--max-num-seqs 1"
    assert predictions.headline_rank is not None and predictions.headline_rank > 0
    text = text_predictions(predictions)
    said = text.split("the headline change, --max-num-seqs 1, ranks ", 1)[1]
    assert said.startswith(f"{predictions.headline_rank + 1} of {len(predictions.ranked)}")
    assert "tokens/s" in said and "TTFT p50" in said  # what the headline costs
    assert "low confidence" in said and "needs the memory" in said  # why the first does not lead
    shown = json_predictions(predictions)
    assert shown["headline"] == "--max-num-seqs 1" and shown["headline_rank"] > 0
