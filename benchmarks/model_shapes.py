"""Model configs for dummy-weight GPU benchmarks (real shapes, random weights)."""

LLAMA3_8B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
             "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
             "vocab_size": 128256, "rope_theta": 500000.0, "rope_scaling": None,
             "rms_norm_eps": 1e-5, "max_position_embeddings": 8192, "tie_word_embeddings": False,
             "attention_bias": False, "mlp_bias": False, "bos_token_id": 1, "eos_token_id": 2,
             "pad_token_id": 2, "torch_dtype": "bfloat16"}
