from config.celery import TASK_ROUTES, app


def test_every_task_has_a_route_to_cpu_or_gpu():
    app.loader.import_default_modules()
    ours = sorted(name for name in app.tasks if not name.startswith("celery."))
    assert ours, "no tasks registered"
    missing = [name for name in ours if name not in TASK_ROUTES]
    assert missing == [], f"tasks without a route in config/celery.py: {missing}"
    assert {route["queue"] for route in TASK_ROUTES.values()} <= {"cpu", "gpu"}
    assert TASK_ROUTES["jobs.tasks.run_chunk_gpu"]["queue"] == "gpu"


def test_routes_do_not_name_tasks_that_do_not_exist():
    app.loader.import_default_modules()
    assert sorted(set(TASK_ROUTES) - set(app.tasks)) == []
