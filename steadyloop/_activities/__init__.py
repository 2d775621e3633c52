"""Activities: all of steadyloop's I/O (model streaming over httpx; tools come next).

Register them on a worker with their configuration bound, e.g.
`Worker(..., workflows=RUN_WORKFLOWS, activities=[*ModelActivities(registry).activities()])`
with `registry = EndpointRegistry.from_env()` (`steadyloop._worker.process.RUN_WORKFLOWS`:
the loop, and the output host its event log is published to).
"""

from steadyloop._activities.model_stream import (
    STREAM_COMPLETION_ACTIVITY,
    ModelActivities,
    StreamProgress,
    stream_turn,
)

__all__ = [
    "STREAM_COMPLETION_ACTIVITY",
    "ModelActivities",
    "StreamProgress",
    "stream_turn",
]
