"""Errors every provider raises, so that callers (the ``crowd`` and ``mturk`` commands, the admin, batch
creation) handle any platform the same way; each message says why and what to do."""


class ProviderError(Exception):
    """A platform operation that cannot go ahead."""


class ProviderConfigurationError(ProviderError):
    """Credentials, the public URL or a setting are missing or wrong: nothing was sent."""


class InsufficientBalance(ProviderError):
    """The account cannot pay for this: refused before anything is spent."""
