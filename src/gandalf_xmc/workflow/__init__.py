"""Above the models: hand a training set to a model (:mod:`.fitting`), train a model on a dataset
with a validation split and an augmentation (:mod:`.pipeline`), and choose the augmentation on
validation (:mod:`.auto`)."""
