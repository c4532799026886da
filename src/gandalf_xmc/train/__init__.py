"""Training: the one soft-target loop, label-cluster shortlists, checkpoints."""
