"""The one error of the regressor's training, loading and scoring: a message for the person who asked."""


class RegressorError(ValueError):
    """Training or loading cannot proceed (unknown campaign, too little data, name taken, ...)."""
