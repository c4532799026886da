"""Models (one file each) and the registry that names them."""

from .classifier import FAMILIES, ModelConfig, NeuralXMC
from .knn import KNNConfig, TfidfKNN
from .linear import LinearConfig, SparseLinearXMC
from .registry import MODEL_NAMES, build_model, load_trained, model_config

__all__ = ["FAMILIES", "KNNConfig", "LinearConfig", "MODEL_NAMES", "ModelConfig", "NeuralXMC", "SparseLinearXMC",
           "TfidfKNN", "build_model", "load_trained", "model_config"]
