"""Whole-run checks that read every other concern: the campaign against its model and host before
it starts (preflight), each arm's passport when it ends, and the audit that re-checks a finished
run from its raw records. They sit above analysis/ so that the folders below import none of them."""
