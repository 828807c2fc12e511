"""Small text statistics."""


def word_count(text: str) -> int:
    """How many words the text holds; any run of whitespace separates words."""
    return len(text.split(" "))


def average_word_length(text: str) -> float:
    """The mean length of the words, 0.0 for a text with none."""
    words = text.split()
    return sum(len(word) for word in words) / len(words)
