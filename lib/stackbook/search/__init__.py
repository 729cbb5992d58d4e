"""The search loop over the knobs each kind declares (engines/knobs.py): one step of the loop as
pure functions, its typed record, the knee server's model and probes, and the `stackbook search`
command's campaign."""
