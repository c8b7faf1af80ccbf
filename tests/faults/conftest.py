from tests.extraction.conftest import character  # noqa: F401 — shared fixtures
from tests.extraction.test_tasks import worker_model  # noqa: F401
from tests.memories.conftest import embedder  # noqa: F401
