from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0002_chunk_ran_on"),
    ]

    operations = [
        migrations.AddField(
            model_name="jobchunk",
            name="lease_expires_at",
            field=models.DateTimeField(
                blank=True,
                help_text="a running chunk's worker renews this while it works; past it, the worker is taken for "
                "lost and the chunk is queued again (jobs.execution.chunks_requeue_lost)",
                null=True,
            ),
        ),
    ]
