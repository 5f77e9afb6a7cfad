"""The scripts' flags keep the forms they had under hand-written argparse (space- or comma-separated lists,
store-true switches, an empty --save-at, probe's positional host), and bad values are usage errors."""
import pytest

from channel import probe
from scripts.bench import core as bench_core
from scripts.bench import verify as bench_verify
from scripts.cards import toy_card as model_card
from scripts.link import netem as netem_link
from scripts.train import drafter_curve, rejection_predictor
from scripts.train import smollm2_drafter as train_smollm2_drafter
from scripts.train import toy_pair as train_toy_pair

CASES = [
    (probe.parse_args, ["10.0.0.1", "--count", "2", "--udp"], {"host": "10.0.0.1", "count": 2, "udp": True}),
    (bench_verify.parse_args, ["--prefixes", "64", "128", "--draft-len", "4"], {"prefixes": [64, 128], "draft_len": 4}),
    (bench_verify.parse_args, [], {"prefixes": [64, 128, 256, 512], "rounds": 30, "target": None}),
    (bench_core.parse_args, ["--draft-lens", "4,8", "--out", "b.json"], {"draft_lens": [4, 8], "out": "b.json"}),
    (bench_core.parse_args, [], {"draft_lens": [4, 8, 16], "prompts": 20, "max_new_tokens": 160}),
    (rejection_predictor.parse_args, ["--threshold", "0.4"], {"threshold": 0.4, "k_max": 16, "rtt_ms": 20.0}),
    (model_card.parse_args, ["--markdown-only", "--n-sd", "5"], {"markdown_only": True, "n_sd": 5, "n_acc": 300}),
    (train_toy_pair.parse_args, ["--stages", "tokenizer,card", "--save-at", ""],
     {"stages": ["tokenizer", "card"], "save_at": [], "steps": None}),
    (train_toy_pair.parse_args, ["--save-at", "10,20", "--steps", "30"], {"save_at": [10, 20], "steps": 30}),
    (netem_link.parse_args, ["--dry-run", "--no-netem", "--side", "edge", "--rate-up-mbps", "5"],
     {"dry_run": True, "no_netem": True, "side": "edge", "rate_up_mbps": 5.0, "rate_mbps": None, "limit_pkts": 1000}),
    (train_smollm2_drafter.parse_args, ["--suite-rows", "500", "--no-head-top-k", "--milestone-tokens", "1000,2000"],
     {"suite_rows": 500, "head_top_k": False, "milestone_tokens": [1000, 2000], "free_rows": -1, "fresh": False}),
    (drafter_curve.parse_args, ["--per-group", "2", "--last", "1", "--no-built", "--plot", ""],
     {"per_group": 2, "last": 1, "built": False, "plot": "", "draft_len": 8}),
]


@pytest.mark.parametrize("parse, argv, expected", CASES)
def test_flag_forms(parse, argv, expected):
    cfg = parse(argv)
    assert {k: getattr(cfg, k) for k in expected} == expected


@pytest.mark.parametrize("parse, argv", [
    (probe.parse_args, []),  # the host is required
    (bench_verify.parse_args, ["--prefixes"]),
    (train_toy_pair.parse_args, ["--stages", "tokenizer,bogus"]),
    (netem_link.parse_args, ["--side", "bogus"]),
    (bench_core.parse_args, ["--draft-lens", "4,x"]),
    (train_smollm2_drafter.parse_args, ["--free-rows", "-5"]),
    (drafter_curve.parse_args, ["--per-group", "0"]),
])
def test_bad_values_are_usage_errors(parse, argv):
    with pytest.raises(SystemExit) as e:
        parse(argv)
    assert e.value.code == 2
