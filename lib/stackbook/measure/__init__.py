"""Measurement of one arm: the sweep, latency and throughput metrics under explicit names, engine
telemetry, and the prefix-cache protocol."""
