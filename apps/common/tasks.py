from celery import shared_task


@shared_task(name="common.ping", soft_time_limit=10, time_limit=20)
def ping(value: str) -> str:
    """Answers its argument: a health check that a worker is consuming the queue."""
    return f"pong:{value}"
