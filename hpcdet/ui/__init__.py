"""The web UI, served from the daemon's host behind a door only its user can open (a secret
token, a private Unix socket or loopback, same-origin actions). ``door`` decides who may
enter; ``app`` is the Starlette application over the views and the daemon link; ``serve``
binds it and says how to reach it from a laptop."""
