"""Request records with every required field filled, so a test states only the fields it is about."""
from stackbook.loadgen.records import RequestRecord

DEFAULTS = dict(run_id="r", arm="a", point="c1-r0", phase="measure", concurrency=1, request_index=0,
                scheduled_s=0, sent_s=0, end_s=1, sent_unix=0, prompt_tokens_client=1, output_tokens_requested=4)


def request_record(**fields) -> RequestRecord:
    """A measured request of point c1-r0 that took one second; `fields` override any default."""
    return RequestRecord(**(DEFAULTS | fields))


def sentinel_record(check: str, text: str, error: str = "none") -> RequestRecord:
    """The reply `text` to the canary check `check`, sent as a sentinel of point c1-r0."""
    return request_record(phase="sentinel", sentinel=check, output_tokens_requested=16, output_text=text,
                          error_class=error)
