"""Readers, writers, the dataset object and dataset presets."""

from .dataset import Split, XMCDataset, embedded_dataset_path, load_dataset, sample_dataset, write_dataset
from .formats import (
    read_bow,
    read_filter_pairs,
    read_lf_json,
    read_sparse_text,
    write_bow,
    write_filter_pairs,
    write_lf_json,
    write_sparse_text,
)
from .presets import PRESETS, preset_for, propensity_constants
from .stats import dataset_stats

__all__ = [
    "Split",
    "XMCDataset",
    "embedded_dataset_path",
    "load_dataset",
    "sample_dataset",
    "write_dataset",
    "read_bow",
    "read_filter_pairs",
    "read_lf_json",
    "read_sparse_text",
    "write_bow",
    "write_filter_pairs",
    "write_lf_json",
    "write_sparse_text",
    "PRESETS",
    "preset_for",
    "propensity_constants",
    "dataset_stats",
]
