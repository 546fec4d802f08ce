import pytest

from radixgen.core import SamplingParams
from radixgen.runtime.detokenizer import IncrementalDetokenizer

pytestmark = pytest.mark.model


def _stream(tokenizer, text, **params):
    ids = tokenizer.encode(text, add_special_tokens=False)
    detok = IncrementalDetokenizer(tokenizer, SamplingParams(**params))
    pieces = [detok.push([t], None) for t in ids]
    return pieces, detok


def test_deltas_concatenate_to_the_full_text_without_partial_utf8(tokenizer):
    text = "Héllo wörld — naïve café 🙂 日本語のテキスト"
    pieces, detok = _stream(tokenizer, text)
    pieces.append(detok.push([], {"type": "length"}))
    assert "".join(pieces) == text
    assert not any("\ufffd" in p for p in pieces)


def test_stop_string_is_trimmed_and_never_streamed(tokenizer):
    pieces, detok = _stream(tokenizer, "one two THE END three", stop=("THE END",))
    pieces.append(detok.push([], {"type": "stop", "matched": "THE END"}))
    assert "".join(pieces) == "one two "
    assert all("THE" not in p for p in pieces)


def test_held_back_text_is_released_when_it_is_not_a_stop(tokenizer):
    pieces, detok = _stream(tokenizer, "a b THE ENDLESS", stop=("THE END!",))
    pieces.append(detok.push([], {"type": "length"}))
    assert "".join(pieces) == "a b THE ENDLESS"
