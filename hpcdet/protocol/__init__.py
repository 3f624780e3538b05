"""How the faces (CLI, SDK, web UI) and the daemon talk, below both: the requests and replies
(``messages``), the file-drop transport's format on disk (``filedrop``), and finding, starting
and stopping the daemon (``process``). The client is ``hpcdet.link``; the daemon serves in
``hpcdet.daemon.requests`` and ``hpcdet.daemon.commands``."""
