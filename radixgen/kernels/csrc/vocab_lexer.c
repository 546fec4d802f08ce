/* Lex every vocabulary token from one lexer state and group the tokens by outcome.
 *
 * The grammar's per-lexer-state vocabulary index (radixgen/grammar/cfg/vocabulary_index.py) needs, for
 * lexer state q and every token, the terminals the token's bytes complete (ignored ones
 * dropped) and the set of types its trailing partial terminal may still become. numpy does it
 * a byte column at a time over all ~49k tokens (~3 ms a state, dead tokens included); this loop
 * walks each token once and stops at the dead state (~0.3 ms).
 *
 * Inputs: the lexer's tables trans / emit [num_states * 256] (emit: the type a byte completes,
 * or -1), ignored [num_types] (1: an ignored type, dropped from the sequence), state_set
 * [num_states] (index of the state's winnable type set), the tokens as bytes with offsets
 * [num_rows + 1]. A row's completed sequence is keyed by one int64: its first `limit` types as
 * digits in base `base` (number of types + 1), so base ** limit must fit in an int64.
 *
 * Outputs: row_group [num_rows] (the group of the row, -1 dead, -2 more than `limit` types:
 * the caller keys those itself), per group its key, set and first row in `order`
 * (group_start [num_groups + 1]), and order [num_rows] (the grouped rows, ascending within a
 * group). Groups are numbered in order of first appearance. `table` is caller scratch of
 * table_size (a power of two >= 2 * num_rows) int32 entries, all -1 on entry (a hash table
 * from (key, set) to group). Returns the number of groups.
 */
#include <stdint.h>

static uint64_t mix(uint64_t key, uint64_t set) {
    uint64_t h = key * 0x9E3779B97F4A7C15ULL ^ (set + 0x632BE59BD9B4E019ULL) * 0xC2B2AE3D27D4EB4FULL;
    return h ^ (h >> 29);
}

int64_t lex_vocab(const int32_t *trans, const int16_t *emit, const uint8_t *ignored,
                  const int16_t *state_set, const uint8_t *bytes, const int64_t *offsets,
                  int64_t num_rows, int32_t q, int64_t base, int32_t limit,
                  int64_t *row_group, int64_t *group_key, int32_t *group_set,
                  int64_t *group_start, int32_t *order, int32_t *table, int64_t table_size) {
    int64_t num_groups = 0;
    uint64_t mask = (uint64_t)table_size - 1;
    for (int64_t r = 0; r < num_rows; r++) {
        int32_t s = q, count = 0;
        int64_t key = 0;
        for (int64_t i = offsets[r]; i < offsets[r + 1]; i++) {
            int64_t at = ((int64_t)s << 8) | bytes[i];
            int16_t e = emit[at];
            s = trans[at];
            if (s == 0) break;
            if (e >= 0 && !ignored[e]) {
                if (count < limit) key = key * base + e + 1;
                count++;
            }
        }
        if (s == 0) { row_group[r] = -1; continue; }
        if (count > limit) { row_group[r] = -2; continue; }
        int32_t set = state_set[s];
        uint64_t h = mix((uint64_t)key, (uint64_t)set) & mask;
        while (table[h] >= 0 && (group_key[table[h]] != key || group_set[table[h]] != set))
            h = (h + 1) & mask;
        if (table[h] < 0) {
            table[h] = (int32_t)num_groups;
            group_key[num_groups] = key;
            group_set[num_groups] = set;
            group_start[num_groups] = 0;
            num_groups++;
        }
        row_group[r] = table[h];
        group_start[table[h]]++;
    }
    /* sizes -> starts, then rows into place (ascending within each group) */
    int64_t total = 0;
    for (int64_t g = 0; g < num_groups; g++) {
        int64_t size = group_start[g];
        group_start[g] = total;
        total += size;
    }
    group_start[num_groups] = total;
    for (int64_t r = 0; r < num_rows; r++)
        if (row_group[r] >= 0) order[group_start[row_group[r]]++] = (int32_t)r;
    for (int64_t g = num_groups; g > 0; g--) group_start[g] = group_start[g - 1];
    group_start[0] = 0;
    return num_groups;
}
