"""Every committed run, its analysis rendered anew by today's page code, opens on its answer: at
1,400 x 900 each of the answer block's sentences (which arm, how sure, inside which SLO, at what
cost, on which host; a routing campaign's sixth, which routing policy) lies whole inside the first
900 px, and reads as the library words it from the run. The analysis is the committed one, not
executed again here: that today's code computes it from the run's records is what the audit
(tests/unit/evidence/test_committed_runs_agree.py) and nbval (test_committed_analyses.py) prove of
every committed run, and a rerender's own page is tested in test_report_browser.py. The
quickstart reference's first screen is the README's picture: with STACKBOOK_README_PNG set (`make
readme-screenshot`), this test writes it there."""
import json
import os

import pytest
from stackbook.analysis.answer import answer
from stackbook.analysis.answer_facts import other_runs, run_facts
from stackbook.browser import INSTALL_HINT, Chromium, find_chromium
from stackbook.config.loading import load_campaign
from stackbook.evidence.rundir import RunDir
from stackbook.locations import REPO_ROOT

from tests.notebooks.test_report_browser import ANSWER_LINES
from tests.support.runs import copy_committed_run_to

pytestmark = pytest.mark.skipif(find_chromium() is None, reason=f"no Chromium: {INSTALL_HINT}")

RUNS = sorted(p.parent.relative_to(REPO_ROOT / "outputs").as_posix()
              for p in (REPO_ROOT / "outputs").glob("*/*/40_analysis.ipynb"))
README_RUN = "quickstart/reference"
QUESTIONS = ["Which arm", "How sure", "Inside which SLO", "At what cost", "On which host"]
SCREEN = (1400, 900)
# Words in table headers that the browser lays out over more than one line ("lo / a / d"); the parts
# of a hyphenated word count apart.
BROKEN_HEADER_WORDS = """JSON.stringify((() => {
  const broken = [];
  for (const th of document.querySelectorAll('thead th')) {
    const walk = document.createTreeWalker(th, NodeFilter.SHOW_TEXT);
    for (let node = walk.nextNode(); node; node = walk.nextNode()) {
      for (const m of node.textContent.matchAll(/[^\\s\\-]+/g)) {  // a hyphen is a break between words
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const tops = new Set(Array.from(range.getClientRects()).filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (tops.size > 1) broken.push(m[0]);
      }
    }
  }
  return broken;
})())"""


def test_every_committed_run_is_read():
    assert len(RUNS) >= 11 and README_RUN in RUNS and "quickstart/avx2-host" in RUNS


@pytest.mark.parametrize("committed", RUNS)
def test_a_rendered_copy_opens_on_its_five_answers_inside_the_first_900_px(committed, tmp_path):
    from stackbook.report_page import write_page

    campaign, run_id = committed.split("/")
    run = RunDir(copy_committed_run_to(tmp_path / campaign / run_id, campaign, run_id,
                                       ignore=("requests.jsonl",)))
    write_page(run.analysis_notebook, run.report, title=f"{campaign} · {run_id} · stackbook report")
    with Chromium(width=SCREEN[0], height=SCREEN[1]) as browser:
        browser.open(run.report)
        lines = json.loads(browser.evaluate(ANSWER_LINES))
        broken = json.loads(browser.evaluate(BROKEN_HEADER_WORDS))
        wide = browser.inspect().layout.overflowing_tables
        if committed == README_RUN and os.environ.get("STACKBOOK_README_PNG"):
            browser.screenshot(os.environ["STACKBOOK_README_PNG"], SCREEN[1])
    said = [line["text"] for line in lines]
    routed = QUESTIONS[:1] + ["Which routing policy"] + QUESTIONS[1:]  # a campaign with replicas behind a router
    assert [t.split("? ", 1)[0] for t in said] == (routed if committed.startswith("routing/") else QUESTIONS)
    assert all(line["bottom"] <= SCREEN[1] for line in lines), (committed, lines)
    name = load_campaign(run.campaign_resolved).name
    expected = [f"{s.question}? {s.text}" for s in answer(run_facts(run), other_runs(run, name))]
    assert said == [" ".join(t.split()) for t in expected]
    assert broken == [] and wide == [], (broken, wide)  # headers break between words, and still fit
    host = said[-1]
    assert "CPU" in host or "GPU" in host or "host" in host, host  # the host is named, whichever it is
