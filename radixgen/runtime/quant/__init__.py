"""Quantized linear weights (`--quantization fp8 | nvfp4`): the weight type the model's linear
layers dispatch on (`weight.QuantizedWeight`), quantize-on-load from a bf16/fp32 checkpoint
(`weight`, with the NVFP4 scale search of `scale_search`), the matmul per device (`linear`),
pre-quantized checkpoints of ModelOpt and compressed-tensors read exactly (`checkpoint`) and
the converter that writes them (`export`, `python -m radixgen.runtime.quant.export`)."""
