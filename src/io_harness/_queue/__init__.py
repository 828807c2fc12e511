"""The queue of runs and its workers: pgqueuer over the PostgreSQL store's database.

``Harness.enqueue`` stores a run and queues a job that says "drive run X
from its last committed step"; ``Harness.work`` (and ``ioh worker``) takes
such jobs on any number of machines. pgqueuer and psycopg are imported when
a queue is first used, never with ``io_harness``.
"""

from io_harness._queue._database import ENTRYPOINT, QUEUE_LABEL, WAITING_LABEL, put, queue_url
from io_harness._queue._drives import Drive, DriveKind, WorkReport
from io_harness._queue._runs import decide_awaited, is_queued, requeue_run, summary_of
from io_harness._queue._worker import RunDriver, Worker

__all__ = [
    "ENTRYPOINT",
    "QUEUE_LABEL",
    "WAITING_LABEL",
    "Drive",
    "DriveKind",
    "RunDriver",
    "WorkReport",
    "Worker",
    "decide_awaited",
    "is_queued",
    "put",
    "queue_url",
    "requeue_run",
    "summary_of",
]
