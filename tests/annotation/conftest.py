import pytest
from django.core.cache import cache


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Rate-limit counters live in the cache: every test starts with none."""
    cache.clear()
    yield
    cache.clear()


def pytest_collection_modifyitems(items):
    """WhiteNoise warns that the test run has no collected static files; irrelevant here."""
    for item in items:
        if "tests/annotation/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.filterwarnings("ignore:No directory at:UserWarning"))
