"""The errors numbatok raises at its boundary: all are ValueError subclasses, all say what to do."""


class NumbatokError(ValueError):
    """Base class: bad input or a tokenizer numbatok cannot run exactly."""


class UnsupportedComponentError(NumbatokError):
    """A tokenizer.json component (or option) numbatok does not implement yet.

    Raised instead of approximating: numbatok never silently gives ids other than the reference's.
    """


class InvalidInputError(NumbatokError):
    """Input text that cannot be encoded as given (invalid UTF-8, None in a batch, ...)."""
