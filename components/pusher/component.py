"""tfxd's Pusher component: TFX's Pusher interface, with tfxd's executor."""

from __future__ import annotations

from tfx.components.pusher.component import Pusher as TfxPusher
from tfx.dsl.components.base import executor_spec

from tfxd.components.pusher import executor


class Pusher(TfxPusher):
    """Pushes a blessed model to the push destination, its evaluation beside it."""

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)
