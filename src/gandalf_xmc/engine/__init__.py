"""What the models are built on and nothing above them imports back: the label tree, the linear
solver, beam search, the epoch loop and the label clusters of the neural models."""
