"""The campaign file: its schema (protocol, workload, arrival patterns, length distributions, arms),
loading, and error messages that name the field and the fix."""
