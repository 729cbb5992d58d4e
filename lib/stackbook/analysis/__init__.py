"""Charts and verdicts over a finished run: fairness and comparison of arms, the decision questions,
the demand map, queueing models and the figures."""
