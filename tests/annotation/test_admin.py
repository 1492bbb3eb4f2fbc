import pytest

from annotation.models import Assignment, Candidate

from .parabank_data import import_contract

pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings("ignore:No directory at:UserWarning")]


def test_read_only_admin_pages(admin_client, tmp_path):
    import_contract(tmp_path)
    for model in ("campaign", "reference", "candidate", "worker", "batch", "hit", "assignment", "judgment"):
        assert admin_client.get(f"/admin/annotation/{model}/").status_code == 200, model
        assert admin_client.get(f"/admin/annotation/{model}/add/").status_code == 403, model
    page = admin_client.get(f"/admin/annotation/assignment/{Assignment.objects.first().pk}/change/")
    assert page.status_code == 200
    assert admin_client.get(f"/admin/annotation/candidate/{Candidate.objects.first().pk}/change/").status_code == 200
