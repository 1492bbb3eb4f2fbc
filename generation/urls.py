"""Staff-only research pages of generation/ (mounted at /research/)."""
from django.urls import path

urlpatterns: list = []
