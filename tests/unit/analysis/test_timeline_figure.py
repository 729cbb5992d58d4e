"""The per-request timeline draws no more rows than the figure can show: a long point draws an
even stride of its requests and says so, every failure keeps its cross."""
import matplotlib

matplotlib.use("Agg")
from stackbook.analysis import timeline_plots  # noqa: E402
from stackbook.loadgen.records import RequestRecord  # noqa: E402


def _records(n: int, failed: set[int]) -> list[RequestRecord]:
    return [RequestRecord(run_id="r", arm="a", point="rate9-r0", phase="measure", repetition=0, attempt=0,
                          request_index=i, sent_s=i * 0.01, first_token_s=i * 0.01 + 0.005, end_s=i * 0.01 + 0.02,
                          sent_unix=1e9 + i * 0.01, concurrency=1, scheduled_s=i * 0.01, prompt_tokens_client=8,
                          output_tokens_requested=4, status=503 if i in failed else 200,
                          error_class="http_error" if i in failed else "none")
            for i in range(n)]


def _drawn(fig):
    ax = fig.axes[0]
    lines = sum(len(c.get_segments()) for c in ax.collections if hasattr(c, "get_segments"))
    crosses = sum(len(line.get_xdata()) for line in ax.lines if line.get_marker() == "x")
    return ax.get_title(), lines, crosses


def test_a_short_point_draws_every_request():
    title, lines, crosses = _drawn(timeline_plots.request_timeline(_records(50, {7})))
    assert title.endswith("(50 requests)") and lines == 2 * 50 and crosses == 1


def test_a_long_point_draws_a_stride_and_every_failure():
    n = 3 * timeline_plots.TIMELINE_ROWS + 1
    failed = {1, 2, n - 1}
    title, lines, crosses = _drawn(timeline_plots.request_timeline(_records(n, failed)))
    assert title.endswith(f"(every 4th of {n:,} requests)") and lines == 2 * len(range(0, n, 4))
    assert crosses == len(failed)
    title, lines, _ = _drawn(timeline_plots.request_timeline(_records(timeline_plots.TIMELINE_ROWS + 1, set())))
    assert title.endswith(f"(every 2nd of {timeline_plots.TIMELINE_ROWS + 1:,} requests)")
    assert [timeline_plots._ordinal(k) for k in (1, 2, 3, 4, 11, 12, 13, 21, 22, 112)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "112th"]
