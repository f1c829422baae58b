"""bwtune: tune and serve SGLang for large MoE models on Blackwell GPUs (controller side)."""

__version__ = "0.1.0"
