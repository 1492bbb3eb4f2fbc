"""The admin's job actions get their own permissions (``jobs.view_job`` alone cancelled and resumed jobs);
whoever could change jobs keeps cancelling and resuming them."""

from django.db import migrations

from api.permissions import permissions_grant_to_holders

NEW = [("cancel_job", "Can cancel jobs"), ("resume_job", "Can resume jobs")]


def grant(apps, schema_editor):
    permissions_grant_to_holders(apps, app_label="jobs", model="job", new=NEW, held="change_job")


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0003_chunk_lease"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.AlterModelOptions(name="job", options={"ordering": ["-id"], "permissions": NEW}),
        migrations.RunPython(grant, migrations.RunPython.noop),
    ]
