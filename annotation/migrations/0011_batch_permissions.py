"""A batch's platform operations get their own permissions (publish, sync, approve, expire; creating a draft
is ``add_batch``): they all were ``change_batch``, which keeps granting them to whoever held it."""

from django.db import migrations

from api.permissions import permissions_grant_to_holders

NEW = [
    ("publish_batch", "Can publish batches"),
    ("sync_batch", "Can sync batches with their platform"),
    ("approve_batch", "Can approve (pay) batches' work"),
    ("expire_batch", "Can expire batches"),
]


def grant(apps, schema_editor):
    permissions_grant_to_holders(
        apps, app_label="annotation", model="batch", new=[*NEW, ("add_batch", "Can add batch")], held="change_batch"
    )


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0010_batch_publish_claim"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="batch",
            options={"ordering": ["-id"], "permissions": NEW, "verbose_name_plural": "batches"},
        ),
        migrations.RunPython(grant, migrations.RunPython.noop),
    ]
