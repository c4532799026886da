"""Gandalf and LabelMix: label-feature data augmentation for extreme multi-label classification.

Public entry points:

* :func:`gandalf_xmc.data.load_dataset` - read a dataset in the field's formats;
* :func:`gandalf_xmc.graph.label_graph` - the soft targets of each label's extra point;
* :func:`gandalf_xmc.augment.gandalf_points` / :func:`gandalf_xmc.augment.combine` - the data;
* :func:`gandalf_xmc.metrics.evaluate` - P@k, nDCG@k, PSP@k, PSnDCG@k, R@k, C@k.
"""

__version__ = "0.1.0"
