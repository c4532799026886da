"""Above the models: train a model on a dataset with a validation split and an augmentation
(:mod:`.pipeline`), and choose the augmentation on validation (:mod:`.auto`)."""
