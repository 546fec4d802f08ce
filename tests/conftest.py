import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(scope="session")
def model_path():
    from radixgen.runtime.model.embedded import default_model_path

    return default_model_path()


@pytest.fixture(scope="session")
def tokenizer(model_path):
    from radixgen.runtime.engine import load_tokenizer

    return load_tokenizer(model_path)
