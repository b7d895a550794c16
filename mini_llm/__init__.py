"""mini_llm: a minimal Qwen3 transformer with a static KV cache and one forward path."""
from .batch import generate_batch
from .cache import KVCache
from .config import Config
from .generate import generate, logits_to_probs, sample_next
from .load import load_model, load_tokenizer
from .model import Transformer
from .quant import fake_quant_int, quantized_copy

__all__ = [
    "Config", "KVCache", "Transformer", "generate", "generate_batch", "logits_to_probs", "sample_next",
    "fake_quant_int", "quantized_copy", "load_model", "load_tokenizer",
]
