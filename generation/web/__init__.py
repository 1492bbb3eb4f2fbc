"""generation/ on the web: the generate form (``forms``, the admin's "Generate" page and the API's), the generate
API (``api``) and the staff page of a reference's constraint sets (``views_constraints``); ``generation/urls.py``
mounts them."""
