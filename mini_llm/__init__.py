"""mini_llm: a minimal Qwen3 transformer with a preallocated KV cache and one forward path."""
from .batch import generate_batch
from .cache import KVCache, FixedShapeCache
from .config import Config
from .generate import generate
from .graphs import CapturedCall, FixedShapeDecoder, fixed_shape_generate
from .load import Tokenizer, load_model, load_tokenizer
from .model import Transformer
from .quant import fake_quant_int, quantized_copy
from .sampling import GREEDY, SamplingParams, logits_to_probs, sample_next

__all__ = [
    "CapturedCall", "Config", "KVCache", "FixedShapeCache", "FixedShapeDecoder", "GREEDY", "SamplingParams",
    "Transformer", "generate", "generate_batch", "logits_to_probs", "sample_next", "fixed_shape_generate",
    "fake_quant_int", "quantized_copy", "load_model", "load_tokenizer", "Tokenizer",
]
