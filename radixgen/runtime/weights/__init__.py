"""Weight versions: a model's weights as named versions (`version`), the checks a new version
passes before it serves (`checks`), the resident copies and how a switch exchanges them
(`resident`), the background update and rollback (`manager`), and the drain rule that keeps
every response on one version (`gate`). The radix cache keys KV by `CacheNamespace` (weight
version, adapter), so no version ever reads another's KV and nothing is flushed on a switch."""
