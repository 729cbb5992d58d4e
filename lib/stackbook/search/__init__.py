"""The search loop: knobs declared on each kind, one step of the loop as pure functions, its
typed record, the knee server's model and probes, and the `stackbook search` command's campaign."""
