"""KV memory and prefix caching: slot allocation, KV pools, the radix prefix cache."""

from radixgen.radix.radix_cache import (
    InsertResult,
    MatchResult,
    NoPrefixCache,
    PrefixCache,
    RadixCache,
)

__all__ = ["InsertResult", "MatchResult", "NoPrefixCache", "PrefixCache", "RadixCache"]
