"""What every entry point (the CLI, the client, the in-process agent, the
worker) stands on: the connection to Temporal (``connection``), the data
converter (``converter``) and the plugins that install it (``client_plugin``
on a client, ``plugin`` on a worker or a replayer), the payload codec and its HTTP server
(``codec``, ``codec_server``), tracing (``tracing``, ``span_attributes``),
the embedded dev server (``dev_server``), a worker's Worker Deployment Version
(``deployment``), log routing (``logs``) and the
approval callbacks (``approval_callbacks``). Over the workflows and activities, under the entry
points."""
