"""Both word Levenshtein distances (diversity's bins and features, the decoder's dissimilar re-ranking) are
rapidfuzz's: they must agree with the textbook dynamic programme on any token lists, long ones (more
than 64 tokens: several machine words in the bit-parallel algorithm) included."""

from hypothesis import given, settings, strategies as st

from generation.decoding import word_levenshtein as rerank_distance
from scoring.diversity import sequence_levenshtein, word_levenshtein


def reference_distance(a: list[str], b: list[str]) -> int:
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


# a small vocabulary, so that lists share words (all-different lists only test the length bound)
token_lists = st.lists(st.sampled_from(["the", "cat", "sat", "on", "a", "mat", "Mat", "mat.", "é", ""]), max_size=150)


@settings(derandomize=True, max_examples=300, deadline=None, database=None)
@given(a=token_lists, b=token_lists)
def test_word_distances_match_the_textbook_dp(a, b):
    expected = reference_distance(a, b)
    assert sequence_levenshtein(a, b) == expected
    assert rerank_distance(a, b) == expected


@settings(derandomize=True, max_examples=100, deadline=None, database=None)
@given(a=st.text(alphabet="ab ,.C", max_size=80), b=st.text(alphabet="ab ,.C", max_size=80))
def test_normalised_text_distance_ignores_case_and_punctuation(a, b):
    def norm(text: str) -> list[str]:
        return text.lower().replace(",", "").replace(".", "").split()

    assert word_levenshtein(a, b) == reference_distance(norm(a), norm(b))
