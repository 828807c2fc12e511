from textstats import average_word_length, word_count


def test_counts_words_separated_by_single_spaces():
    assert word_count("the quick brown fox") == 4


def test_counts_words_separated_by_any_whitespace():
    assert word_count("the  quick\tbrown\nfox ") == 4


def test_average_word_length():
    assert average_word_length("ab abcd") == 3.0


def test_average_word_length_of_empty_text_is_zero():
    assert average_word_length("") == 0.0
