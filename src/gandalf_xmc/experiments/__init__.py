"""Paper experiments and the demo."""
