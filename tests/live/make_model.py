"""Build a tiny random-weight Llama model directory for a live vLLM server.

Run with the engines venv's Python (it has `tokenizers`):
    python make_model.py OUT_DIR
Writes config.json (LlamaForCausalLM, hidden 256, 2 layers, 4 heads of 64, 2 KV
heads), a word-level BPE tokenizer.json trained here on generated text, and
tokenizer_config.json. Weights are not written: the server runs with
`--load-format dummy`.
"""

import json
import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

WORDS = ("the quick brown fox jumps over lazy dog server token batch decode prefill cache queue "
         "request latency throughput model layer head kernel memory tensor stream sample").split()


def corpus():
    for i in range(2000):
        yield " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] + (str(j % 10) if j % 5 == 0 else "") for j in range(24))


def main(out: str) -> None:
    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1024, special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer)
    tok.save(str(d / "tokenizer.json"))
    vocab = tok.get_vocab_size()
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
        "vocab_size": vocab, "max_position_embeddings": 2048, "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": False,
        "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16",
    }
    (d / "config.json").write_text(json.dumps(config, indent=2))
    (d / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
        "unk_token": "<unk>", "model_max_length": 2048, "add_bos_token": False,
    }, indent=2))
    print(json.dumps({"dir": str(d), "vocab_size": vocab}))


if __name__ == "__main__":
    main(sys.argv[1])
