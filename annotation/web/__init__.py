"""annotation over HTTP: the slider page and the local annotators' entry points (``views``), the submission API and
staff's batch API (``api``, ``serializers``), its rate limits (``throttles``) and who may do what (``permissions``).
The routes are ``annotation.urls``."""
