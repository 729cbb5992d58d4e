"""Capacity inside the SLO: the highest load whose requests meet the SLO, found by probing loads
and stated as an interval between the highest load proven inside and the lowest proven outside.
The search and the ladder are pure logic over a probe; what a probe runs is the caller's."""
