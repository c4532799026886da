"""Model families (one file each)."""

from .knn import KNNConfig, TfidfKNN

__all__ = ["KNNConfig", "TfidfKNN"]
