"""Activities: all of steadyloop's I/O (model streaming over httpx; tools come next).

Register them on a worker with their configuration bound, e.g.
`Worker(..., activities=[ModelActivities(EndpointRegistry.from_env()).stream_completion])`.
"""

from steadyloop.activities.model_stream import (
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
