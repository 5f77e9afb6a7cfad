"""Methods side by side (testbed/common/compare.py): paired accuracy against the first method, and groups of kinds."""
import pandas as pd
import pytest

from testbed.common.compare import group_summaries, paired_rows, paired_text, prompt_groups
from testbed.common.summary import prompt_correct


def decode(tokens):
    return "".join(tokens)


def frames():
    prompts = pd.DataFrame({"prompt_id": ["a", "b", "c", "d"], "answer": [["x"], ["y"], ["z"], ["w"]],
                            "kind": ["author", "addition", "author", "advice"],
                            "form": ["first", "last", "last", "free"]})
    greedy = pd.DataFrame({"prompt_id": list("abcd"), "tokens": [["x is it."], ["y is it."], ["q."], ["w is."]],
                           "t_e2e_s": [1.0, 1.0, 1.0, 1.0]})
    ours = pd.DataFrame({"prompt_id": list("abcd"), "tokens": [["q."], ["y is it."], ["z is it."], ["q."]],
                         "t_e2e_s": [0.5, 0.5, 0.5, 0.5]})
    return prompts, greedy, ours


def test_paired_rows_count_lost_and_gained_per_group():
    prompts, greedy, ours = frames()
    correct = {"greedy": prompt_correct(greedy, prompts, decode), "auto": prompt_correct(ours, prompts, decode)}
    assert correct["greedy"]["correct"].tolist() == [True, True, False, True]
    groups = prompt_groups(prompts)
    assert groups == {"seen answer-last": {"b"}, "seen free": {"d"}, "seen question": {"b"},
                      "unseen answer-last": {"c"}, "unseen question": {"a", "c"}}  # answer-last overlaps
    rows = {r["group"]: r for r in paired_rows(correct, groups)}
    assert (rows["all"]["lost"], rows["all"]["gained"]) == (2, 1)
    assert (rows["unseen question"]["lost"], rows["unseen question"]["gained"]) == (1, 1)
    assert (rows["unseen answer-last"]["lost"], rows["unseen answer-last"]["gained"]) == (0, 1)
    assert rows["all"]["delta"] == pytest.approx(-0.25)
    assert "greedy" in paired_text(list(rows.values()))


def test_one_method_or_no_answers_gives_no_pairs():
    prompts, greedy, _ = frames()
    assert paired_rows({"greedy": prompt_correct(greedy, prompts, decode)}, None) == []
    assert prompt_correct(greedy, prompts.drop(columns="answer"), decode) is None
    assert prompt_groups(prompts.drop(columns="kind")) is None


def test_group_summaries_split_the_rounds_by_kind():
    prompts, greedy, _ = frames()
    rounds = pd.DataFrame({"prompt_id": list("aabcd"), "accepted": [1, 3, 2, 0, 4], "drafted": [4] * 5,
                           "uplink_bytes": 10, "downlink_bytes": 5, "t_comm_s": 0.1, "t_verify_s": 0.1,
                           "t_draft_s": 0.1})
    rows = {r["group"]: r for r in group_summaries("greedy", rounds, greedy, prompts, decode, None,
                                                   prompt_groups(prompts))}
    assert rows["unseen question"]["prompts"] == 2 and rows["unseen question"]["aal"] == pytest.approx(4 / 3)
    assert rows["seen free"]["aal"] == 4 and rows["seen question"]["rounds_per_prompt"] == 1


def test_relative_rows_and_the_report(tmp_path, capsys):
    from testbed.report import main
    from wisv.records.paired import relative_rows
    prompts, greedy, ours = frames()
    rounds = pd.DataFrame({"prompt_id": list("abcd"), "accepted": [1, 1, 1, 1], "drafted": [4] * 4,
                           "uplink_bytes": 10, "downlink_bytes": 5, "t_comm_s": 0.1, "t_verify_s": 0.1,
                           "t_draft_s": 0.1})
    fast = rounds.assign(accepted=3)
    groups = prompt_groups(prompts)
    by_group = pd.DataFrame(group_summaries("greedy", rounds, greedy, prompts, decode, None, groups)
                            + group_summaries("auto", fast, ours, prompts, decode, None, groups))
    correct = {"greedy": prompt_correct(greedy, prompts, decode), "auto": prompt_correct(ours, prompts, decode)}
    paired = pd.DataFrame(paired_rows(correct, groups))
    rel = relative_rows(by_group, paired).set_index("group")
    assert "all" not in rel.index and rel.loc["unseen question", "aal_change_pct"] == pytest.approx(200.0)
    assert (rel.loc["unseen question", "lost"], rel.loc["unseen question", "gained"]) == (1, 1)
    run = tmp_path / "run"
    run.mkdir()
    by_group.to_csv(run / "summary_by_group.csv", index=False)
    paired.to_csv(run / "paired.csv", index=False)
    main([str(run), "--out", str(tmp_path / "t.csv")])
    assert "unseen question" in capsys.readouterr().out and len(pd.read_csv(tmp_path / "t.csv")) == len(rel)
    (run / "paired.csv").unlink()  # prompts without answers: no paired rows, the changes all the same
    main([str(run)])
    assert "unseen question" in capsys.readouterr().out
    assert relative_rows(by_group, None)["lost"].isna().all()
    with pytest.raises(SystemExit, match="no .*summary_by_group.csv"):
        main([str(tmp_path)])


def test_the_report_by_prompt_pairs_each_protocol_with_the_runs_first(tmp_path, capsys):
    import json

    from testbed.report import main
    _, greedy, ours = frames()
    run = tmp_path / "run"
    for name, df in (("greedy", greedy), ("auto", ours)):
        (run / name).mkdir(parents=True)
        df.assign(rounds=[4, 4, 4, 4] if name == "greedy" else [2, 2, 2, 2],
                  acceptance_histogram=[[1, 1]] * 4).to_json(run / name / "outputs.jsonl", orient="records", lines=True)
    (run / "config.json").write_text(json.dumps({"protocol": "greedy,auto"}))
    main([str(run), "--by-prompt", "--out", str(tmp_path / "p.csv")])
    row = pd.read_csv(tmp_path / "p.csv").iloc[0]
    assert (row["protocol"], row["against"], row["prompts"], row["faster"]) == ("auto", "greedy", 4, 4)
    assert row["latency_change_pct"] == pytest.approx(-50.0) and row["rounds_change_pct"] == pytest.approx(-50.0)
    assert "auto" in capsys.readouterr().out
    (run / "auto" / "outputs.jsonl").unlink()
    with pytest.raises(SystemExit, match="fewer than two protocols with an outputs.jsonl \\(greedy\\)"):
        main([str(run), "--by-prompt"])
    with pytest.raises(SystemExit):
        main([str(run), "--by-prompt", "--against", str(run)])
