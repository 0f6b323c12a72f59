"""The one token counter: a model's tokenizer through litellm, else cl100k_base, offline."""

from __future__ import annotations

import subprocess
import sys

from memory.tokens import count_message_tokens, count_tokens, truncate_to_tokens


def test_counts_with_the_fallback_encoding_offline() -> None:
    assert count_tokens("") == 0
    assert count_tokens("hello") == 1
    assert count_tokens("Caroline went to the support group on 7 May 2023.") == 15


def test_message_tokens_add_framing_per_message() -> None:
    one = [{"role": "user", "content": "hello"}]
    assert count_message_tokens([]) == 0
    assert count_message_tokens(one) == count_tokens("hello") + 4
    assert count_message_tokens(one * 3) == 3 * count_message_tokens(one)


def test_a_named_model_uses_litellms_tokenizer_once_loaded() -> None:
    import litellm

    text = "The quick brown fox jumps over the lazy dog."
    assert count_tokens(text, "gpt-4o") == litellm.token_counter(model="gpt-4o", text=text)
    # A model litellm cannot tokenize offline still gets a count, from the fallback.
    assert count_tokens(text, "nonexistent-provider/unknown-model") == count_tokens(text)


def test_truncation_keeps_whole_words_from_either_end() -> None:
    text = "one two three four five six seven"
    assert truncate_to_tokens(text, 4) == "one two three four"
    assert truncate_to_tokens(text, 4, keep_end=True) == "four five six seven"
    assert truncate_to_tokens(text, 100) == text
    assert truncate_to_tokens(text, 0) == ""
    assert count_tokens(truncate_to_tokens("antidisestablishmentarianism forever", 2)) <= 2


def test_counting_does_not_import_litellm() -> None:
    code = "import sys; from memory.tokens import count_tokens as c; c('hi'); print('litellm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
