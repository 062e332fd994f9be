"""VideoSeek: video reasoning as a multi-turn decision process.

Importing `videoseek` registers the Gymnasium env, so `gymnasium.make` works without importing
`videoseek.envs` first (the env module itself is imported on the first `make`):

>>> import gymnasium as gym, videoseek
>>> videoseek.ENV_ID in gym.registry
True
"""

__version__ = "0.1.0"

ENV_ID = "videoseek/VideoSeek-v0"


def _register() -> None:
    from gymnasium.envs.registration import register, registry

    if ENV_ID not in registry:  # re-registering would warn ("Overriding environment")
        register(id=ENV_ID, entry_point="videoseek.envs.env:VideoSeekEnv")


_register()
