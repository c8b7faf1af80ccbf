from celery import shared_task


@shared_task(name="common.ping", ignore_result=False, soft_time_limit=10, time_limit=20)
def ping(value: str) -> str:
    """Answers its argument: a health check that a worker is consuming the queue (the one task whose result is
    kept: the caller waits for it)."""
    return f"pong:{value}"
