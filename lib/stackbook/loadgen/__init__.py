"""The load generator: the streaming HTTP client, request bodies and drivers (closed and open loop),
arrival schedules, prompts of stated lengths, and raw per-request records."""
