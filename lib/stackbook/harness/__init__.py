"""The harness measuring itself: the zero-latency calibration server, the self-test and the
verdict rules of the fidelity benchmark."""
