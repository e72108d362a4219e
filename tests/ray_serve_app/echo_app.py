"""The Serve app the real-Ray tests deploy through a RayService's serveConfigV2 (import_path
`echo_app:app`), found through the head container's PYTHONPATH as a user's own code would be.

Every answer names the cluster that served it (KubeRay sets RAY_CLUSTER_NAME in its pods, and Ray's
worker processes inherit the raylet's environment) and the Ray version, so a load generator can tell
which cluster answered during an upgrade.
"""

import os

import ray
from ray import serve


@serve.deployment(num_replicas=1, ray_actor_options={"num_cpus": 0})
class Echo:
    def __init__(self):
        self.answer = {"cluster": os.environ.get("RAY_CLUSTER_NAME", ""), "ray": ray.__version__}

    async def __call__(self, request):
        return self.answer


app = Echo.bind()
