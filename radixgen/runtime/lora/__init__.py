"""LoRA adapters served beside the base model, many in one batch: PEFT folders read and checked
against the model (`adapter`), a fixed-size device pool of stacked A/B weights with LRU eviction
(`pool`), the per-forward row-to-slot mapping that adds each row's delta through the SGMV/BGMV
kernels or the CPU path (`batch`), and the named adapters, their in-flight counts and the batch
admission limit (`manager`). Each adapter load has its own radix-cache namespace."""
