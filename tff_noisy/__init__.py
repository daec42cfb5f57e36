"""tff-noisy: federated learning with noisy labels on TensorFlow Federated."""

__version__ = "0.1.0"
